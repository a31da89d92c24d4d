import subprocess

def test_sum():
    out = subprocess.run(["python3", "/app/calc.py", "2", "3"], capture_output=True, text=True)
    assert out.stdout.strip() == "5"

def test_other_numbers():
    out = subprocess.run(["python3", "/app/calc.py", "40", "2"], capture_output=True, text=True)
    assert out.stdout.strip() == "42"
