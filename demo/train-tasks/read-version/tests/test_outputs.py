def test_version():
    assert open("/app/version.txt").read().strip() == "0.9.3"
