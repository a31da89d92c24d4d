"""Verdicts as the owners reach them: ours (horizon.eval.grading.verdict) against the installed reference graders
(terminal-bench 0.2.18's PytestParser and SWEBenchParser, harbor 0.26.0's reward-file parsing), on grader
outputs written in the shapes real graders print, and on the quirks of those parsers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from horizon.eval.grading.verdict import PASSING, parse_reward, tb1_verdict
from tests.engine_fixtures import unavailable

SUMMARY = "=========================== short test summary info ============================"
END = "============================== {} in 0.05s =============================="


def summary(*lines: str, tally: str = "2 passed") -> str:
    return "\n".join(["============================= test session starts ==============================",
                      "collected 2 items", "", "tests/test_outputs.py ..   [100%]", "",
                      "==================================== PASSES ====================================",
                      SUMMARY, *lines, END.format(tally)])  # fmt: skip


TB1 = {
    "all-passed": (
        "pytest",
        summary("PASSED tests/test_outputs.py::test_a", "PASSED tests/test_outputs.py::test_b"),
    ),
    "one-failed": (
        "pytest",
        summary(
            "PASSED tests/test_outputs.py::test_a",
            "FAILED tests/test_outputs.py::test_b - AssertionError: 1 != 2",
        ),
    ),  # fmt: skip
    "xpass-and-passed": ("pytest", summary("PASSED t.py::test_a", "XPASS t.py::test_b - flaky fixed")),
    "header-without-results": ("pytest", summary(tally="no tests ran")),
    "verbose-without-summary": (
        "pytest",
        "t.py::test_a PASSED   [ 50%]\nt.py::test_b PASSED   [100%]\n"
        "============ 2 passed in 0.01s ============\n",
    ),  # fmt: skip
    "xfail-and-passed": ("pytest", summary("PASSED t.py::test_a", "XFAIL t.py::test_b - known bug")),
    "skipped-and-passed": ("pytest", summary("PASSED t.py::test_a", "SKIPPED [1] t.py:12: needs a GPU")),
    "error-in-setup": (
        "pytest",
        summary("PASSED t.py::test_a", "ERROR t.py::test_b - fixture 'db' not found"),
    ),
    "failed-message-with-dashes": ("pytest", summary("FAILED t.py::test_c - AssertionError: x - y - z")),
    "same-name-two-files": ("pytest", summary("FAILED a.py::test_x - boom", "PASSED b.py::test_x")),
    "uppercase-header": ("pytest", "=== SHORT TEST SUMMARY INFO ===\nPASSED t.py::test_a\n"),
    "two-headers": ("pytest", summary("PASSED t.py::test_a", SUMMARY, "FAILED t.py::test_b - late")),
    "status-with-colon": ("pytest", summary("PASSED: t.py::test_a", "FAILED: t.py::test_b")),
    "ansi-colours": (
        "pytest",
        summary("\x1b[32mPASSED\x1b[0m t.py::test_a", "\x1b[31mFAILED\x1b[0m t.py::test_b"),
    ),
    "indented-failed": ("pytest", summary("  FAILED t.py::test_a - AssertionError", "PASSED t.py::test_b")),
    "parametrized": (
        "pytest",
        summary("PASSED t.py::test_p[1-2]", "FAILED t.py::test_p[3-4] - assert 7 == 8"),
    ),
    "class-method": ("pytest", summary("PASSED t.py::TestK::test_m", "PASSED t.py::TestK::test_n")),
    "empty-output": ("pytest", ""),
    "no-tests-ran": ("pytest", "============ no tests ran in 0.01s ============\n"),
    "swebench-passed": (
        "swebench",
        "log...\nSWEBench results starts here\nPASSED\nSWEBench results ends here\n",
    ),
    "swebench-failed": ("swebench", "SWEBench results starts here\nFAILED\nSWEBench results ends here\n"),
    "swebench-no-end": ("swebench", "SWEBench results starts here\nPASSED\n"),
    "swebench-padded": (
        "swebench",
        "SWEBench results starts here\n\n   PASSED  \n\nSWEBench results ends here",
    ),
    "swebench-two-blocks": (
        "swebench",
        "SWEBench results starts here\nPASSED\nSWEBench results ends here\n"
        "SWEBench results starts here\nPASSED\nSWEBench results ends here\n",
    ),  # fmt: skip
}
REWARDS = {
    "txt-one": ("reward.txt", "1\n"), "txt-half-padded": ("reward.txt", "  0.5  "), "txt-empty": ("reward.txt", ""),
    "txt-words": ("reward.txt", "1 passed"), "txt-inf": ("reward.txt", "inf"), "txt-underscore": ("reward.txt", "1_0"),
    "json-reward": ("reward.json", '{"reward": 1}'), "json-other-name": ("reward.json", '{"score": 1}'),
    "json-true": ("reward.json", '{"reward": true}'), "json-two-keys": ("reward.json", '{"a": 1, "b": 0}'),
    "json-bare-number": ("reward.json", "1"), "json-string": ("reward.json", '{"reward": "1"}'),
    "json-nan": ("reward.json", '{"reward": NaN}'), "json-empty-object": ("reward.json", "{}"),
    "json-empty-file": ("reward.json", ""), "json-overflow": ("reward.json", '{"reward": 1e400}'),
    "json-reward-and-more": ("reward.json", '{"reward": 0.25, "tests": 3}'),
}  # fmt: skip


@pytest.fixture(scope="module")
def theirs():
    from tests.conformance.conftest import _missing

    why = _missing()
    if why:
        unavailable(f"reference graders not available: {why}")
    from horizon.eval.reference import environment as reference

    req = {"tb1": list(TB1.values()), "reward": list(REWARDS.values())}
    p = subprocess.run([str(reference.python()), str(Path(__file__).with_name("verdict_driver.py"))],
                       input=json.dumps(req), capture_output=True, text=True, timeout=600)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    return {"tb1": dict(zip(TB1, out["tb1"])), "reward": dict(zip(REWARDS, out["reward"]))}


@pytest.mark.parametrize("case", list(TB1), ids=[f"verdict-tb1-{c}" for c in TB1])
def test_tb1_verdicts_equal_terminal_bench(theirs, case):
    parser, text = TB1[case]
    ours = tb1_verdict(parser, text)
    ref = theirs["tb1"][case]
    assert (ours.error is None, ours.resolved) == (ref["parsed"], ref["resolved"])
    assert {k: v in PASSING for k, v in ours.results.items()} == ref["results"]


@pytest.mark.parametrize("case", list(REWARDS), ids=[f"verdict-harbor-{c}" for c in REWARDS])
def test_reward_files_read_as_harbor_reads_them(theirs, case):
    name, text = REWARDS[case]
    ours, ref = parse_reward(name, text), theirs["reward"][case]
    assert ours.error is None and ours.file == name if ref["valid"] else ours.error, (ours, ref)
    if ref["valid"]:
        rewards = ref["rewards"]
        expected = rewards.get("reward", next(iter(rewards.values())) if len(rewards) == 1 else None)
        assert ours.rewards == rewards and ours.value == expected


def test_the_three_cases_of_the_issue_differ_from_the_old_reading():
    """XPASS beside PASSED fails, a summary header with no result line passes, -v output without a summary fails."""
    assert not tb1_verdict(*TB1["xpass-and-passed"]).resolved
    assert tb1_verdict(*TB1["header-without-results"]).resolved
    assert not tb1_verdict(*TB1["verbose-without-summary"]).resolved
