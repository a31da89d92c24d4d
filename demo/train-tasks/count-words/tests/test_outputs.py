def test_words():
    assert open("/app/words.txt").read().strip() == "12"
