def test_sorted():
    assert open("/app/sorted.txt").read().split() == ["ada", "ben", "kai", "lee", "mira", "zoe"]
