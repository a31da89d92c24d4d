def test_report():
    assert open("/app/out/report.txt").read() == "status ok\n"
