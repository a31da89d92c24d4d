def test_count():
    assert open("/app/count.txt").read().strip() == "11"
