def test_sorted():
    assert open("/app/sorted.txt").read().split() == ["bea", "cleo", "fay", "igor", "nils", "oskar"]
