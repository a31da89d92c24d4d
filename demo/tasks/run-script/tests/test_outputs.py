import os

def test_executable():
    assert os.access("/app/run.sh", os.X_OK)

def test_output():
    assert open("/app/run.out").read() == "ready\n"
