def test_bundle():
    assert open("/app/dist/bundle.txt").read() == "alpha\nbeta\ngamma\n"
