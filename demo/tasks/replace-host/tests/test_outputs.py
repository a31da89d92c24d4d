def test_hosts():
    text = open("/app/app.ini").read()
    assert "localhost" not in text and text.count("db.internal") == 2 and "port = 5432" in text
