def test_version():
    assert open("/app/version.txt").read().strip() == "2.4.1"
