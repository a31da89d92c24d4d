import tarfile

def test_archive():
    with tarfile.open("/app/backup.tar.gz") as t:
        names = set(t.getnames())
    assert {"docs/intro.md", "docs/usage.md"} <= names
