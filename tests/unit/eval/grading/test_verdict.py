"""Verdicts from what a grader printed: TB1's pytest summary."""

import pytest

from horizon.eval.grading.verdict import ParseError, pytest_results


def test_pytest_summary_parsing():
    out = """
============================= short test summary info ==============================
PASSED tests/test_outputs.py::test_a
FAILED tests/test_outputs.py::test_b - AssertionError
ERROR tests/test_outputs.py::test_c
========================= 1 failed, 1 passed, 1 error in 0.1s =========================
"""
    assert pytest_results(out) == {
        "test_a": "PASSED",
        "test_b": "FAILED",
        "test_c": "ERROR",
    }  # named as TB1 names them
    with pytest.raises(ParseError, match="no 'short test summary info' section"):
        pytest_results("no tests ran")
