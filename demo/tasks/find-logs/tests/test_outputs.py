def test_large():
    got = [l.strip().removeprefix("/app/").removeprefix("./") for l in open("/app/large.txt") if l.strip()]
    assert got == ["logs/a.log", "logs/old/c.log"]
