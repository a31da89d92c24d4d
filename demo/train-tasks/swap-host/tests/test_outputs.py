def test_hosts():
    text = open("/app/app.ini").read()
    assert "localhost" not in text and text.count("db.internal") == 3 and "port = 5433" in text
