"""Verdicts as the owning harnesses reach them, from what a grader printed or wrote.

Terminal-Bench v1 (terminal-bench 0.2.18) reads the tests' terminal output with the task's
`parser_name`:
- pytest: the text after the first `=== short test summary info ===` header (any case); each line
  whose first word (a trailing `:` dropped) is a pytest outcome gives a result named by what follows
  the first `::` (a FAILED line loses its last ` - message`); PASSED, XFAIL and SKIPPED count as
  passed, FAILED, XPASS and ERROR as failed; a later line of the same name replaces an earlier one.
  No header is a parse error (not resolved); a header with no result line is resolved.
- swebench: the text between the first "SWEBench results starts here" and the last
  "SWEBench results ends here" must be exactly PASSED; a missing marker is a parse error.
A task is resolved when it parsed and every result passed.

Harbor (harbor 0.26.0) reads /logs/verifier/reward.json first, then reward.txt: reward.txt is one
finite number; reward.json a JSON object whose values are all finite numbers (a single key is the
reward whatever its name; several keys: the one named "reward"). An empty file, bad JSON, a
non-number, a non-finite value, or a JSON value that is not an object has no valid reward.
Every difference from the reference code is tested (tests/conformance/test_verdicts.py, differential).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

SUMMARY_HEADER = re.compile(r"=+\s*short test summary info\s*=+", re.I)
PASSING = {"PASSED", "XFAIL", "SKIPPED"}
FAILING = {"FAILED", "XPASS", "ERROR"}
SWE_START, SWE_END = "SWEBench results starts here", "SWEBench results ends here"


class ParseError(ValueError):
    """The grader's output holds nothing the parser can read (never resolved)."""


def _result(line: str) -> tuple[str, str] | None:
    if line.startswith("FAILED") and " - " in line:
        line = " - ".join(line.split(" - ")[:-1])
    words = line.split(maxsplit=1)
    if len(words) < 2:
        return None
    outcome = words[0].strip().strip(":")
    if outcome not in PASSING | FAILING:
        return None
    name = words[1].strip().split("::", 1)[-1]
    return (name, outcome) if name else None


def pytest_results(text: str) -> dict[str, str]:
    """test name -> pytest outcome, from the short test summary; ParseError without one."""
    parts = SUMMARY_HEADER.split(text, maxsplit=1)
    if len(parts) < 2:
        raise ParseError("no 'short test summary info' section (pytest needs -rA to list the tests)")
    out: dict[str, str] = {}
    for line in parts[1].splitlines():
        r = _result(line)
        if r is not None:
            out[r[0]] = r[1]
    return out


def swebench_results(text: str) -> dict[str, str]:
    if SWE_START not in text or SWE_END not in text:
        raise ParseError(f"no '{SWE_START}' ... '{SWE_END}' block")
    block = text.split(SWE_START, 1)[1].rsplit(SWE_END, 1)[0].strip()
    return {"tests": "PASSED" if block == "PASSED" else "FAILED"}


PARSERS = {"pytest": pytest_results, "swebench": swebench_results}


@dataclass(frozen=True)
class TB1Verdict:
    resolved: bool
    results: dict[str, str]
    error: str | None  # why nothing could be parsed

    @property
    def passed(self) -> int:
        return sum(1 for v in self.results.values() if v in PASSING)

    @property
    def failed(self) -> int:
        return sum(1 for v in self.results.values() if v in FAILING)


def tb1_verdict(parser: str, text: str) -> TB1Verdict:
    try:
        results = PARSERS[parser](text)
    except ParseError as e:
        return TB1Verdict(False, {}, str(e))
    return TB1Verdict(all(v in PASSING for v in results.values()), results, None)


@dataclass(frozen=True)
class Reward:
    value: float | None  # the reward that decides success (None: no valid one)
    file: str | None  # reward.json | reward.txt | None (neither exists)
    error: str | None  # why there is no valid reward file, naming the file
    rewards: dict | None = None  # everything a valid file held

    @property
    def valid(self) -> bool:
        return self.error is None and self.file is not None


def _finite_number(v) -> bool:
    return isinstance(v, int | float) and not (isinstance(v, float) and not math.isfinite(v))


def parse_reward(name: str, text: str) -> Reward:
    """A reward file's content, as Harbor reads it."""
    if not text:
        return Reward(None, name, f"{name}: empty")
    if name == "reward.txt":
        try:
            value = float(text)
        except ValueError:
            return Reward(None, name, f"reward.txt: {text.strip()[:80]!r} is not a number")
        if not math.isfinite(value):
            return Reward(None, name, f"reward.txt: {value} is not a finite number")
        return Reward(value, name, None, {"reward": value})
    try:
        obj = json.loads(text)
    except ValueError as e:
        return Reward(None, name, f"reward.json: not valid JSON ({e})")
    values = obj.values() if isinstance(obj, dict) else [obj]
    bad = [v for v in values if not _finite_number(v)]
    if bad:
        return Reward(None, name, f"reward.json: {bad[0]!r} is not a finite number")
    if not isinstance(obj, dict):
        return Reward(None, name, f"reward.json: expected an object of rewards, got {text.strip()[:80]!r}")
    if "reward" in obj:
        value = obj["reward"]
    elif len(obj) == 1:
        value = next(iter(obj.values()))
    else:
        return Reward(None, name, None, obj)  # valid for Harbor, but no single reward to succeed on
    return Reward(float(value), name, None, obj)
