"""The reference Terminus-2 for the conformance suite, and the suite's summary line.

The reference packages (harbor 0.26.0, terminal-bench 0.2.18) live in their own environment on a
Python >= 3.12 (`make refenv` builds .venv-harbor; `make test` does it first). When it is missing
the fixture tries to build it; when that fails the tests skip and say what is missing, except
under HORIZON_REQUIRE_ENGINES=1 (set by `make test`), where they fail. All inputs of one variant
go to the reference driver in one batch (their agent module takes seconds to import).
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conformance import cases, scenarios
from tests.engine_fixtures import unavailable
from tests.helpers import REPO

VARIANTS = ("harbor", "tb1")


def _missing() -> str | None:
    """Why the reference environment cannot be used, or None."""
    from horizon.eval.reference import environment as reference

    if reference.available():
        return None
    if os.environ.get("HORIZON_REFERENCE_ENV"):
        return f"HORIZON_REFERENCE_ENV={os.environ['HORIZON_REFERENCE_ENV']} has no bin/python"
    from horizon.resources import REFERENCE_REQUIREMENTS, reference_pins

    pkgs = " ".join(reference_pins().values())
    p = subprocess.run([str(REPO / "envs" / "refenv.sh"), str(REPO / ".venv-harbor"), str(REFERENCE_REQUIREMENTS)],
                       capture_output=True, text=True)  # fmt: skip
    if p.returncode != 0 or not reference.available():
        return (
            f"the reference environment (.venv-harbor: {pkgs}) could not be built: {p.stderr.strip()[-400:]}"
        )
    return None


@pytest.fixture(scope="session")
def reference():
    """{variant: {"template": exported template dict, "parse": [...], "limit": [...], ...}}."""
    from tests.conformance.theirs import run_driver

    why = _missing()
    if why:
        unavailable(f"reference Terminus-2 not available: {why}")
    out = {}
    texts = [c.reference_input() for c in cases.PARSER_CASES] + list(cases.EXEMPLARS.values())
    loops = {**scenarios.TURNS, **scenarios.CONTEXT}
    for v in VARIANTS:
        reqs = [
            {"op": "export", "variant": v},
            {"op": "parse", "variant": v, "texts": texts},
            {"op": "limit", "variant": v, "texts": list(cases.TRUNCATION_CASES.values())},
            {"op": "incremental_many", "variant": v, "cases": list(cases.INCREMENTAL_CASES.values())},
            {"op": "keys", "variant": v, "payloads": list(cases.KEY_PAYLOADS.values())},
            *({"op": "loop", "variant": v, **scenarios.for_driver(sc)} for sc in loops.values()),
        ]
        res = run_driver(reqs)
        n = len(cases.PARSER_CASES)
        out[v] = {
            "template": res[0],
            "parse": dict(zip([c.id for c in cases.PARSER_CASES], res[1][:n])),
            "exemplars": dict(zip(cases.EXEMPLARS, res[1][n:])),
            "limit": dict(zip(cases.TRUNCATION_CASES, res[2])),
            "incremental": dict(zip(cases.INCREMENTAL_CASES, res[3])),
            "keys": dict(zip(cases.KEY_PAYLOADS, res[4])),
            "loops": dict(zip(loops, res[5:])),
        }
    return out


def pytest_terminal_summary(terminalreporter):
    stats = terminalreporter.stats
    passed = stats.get("passed", [])
    every = [r for k in ("passed", "failed", "skipped") for r in stats.get(k, []) if getattr(r, "when", "") == "call"
             or k == "skipped"]  # fmt: skip
    lines = []
    for label, marker in (("parser agreement", "parser-"), ("prompt turns byte-equal", "turn-"),
                          ("context management", "context-"), ("truncation", "truncation-"),
                          ("keystrokes to tmux", "keys-"), ("incremental output", "incremental-"),
                          ("verdict agreement", "verdict-")):  # fmt: skip
        for v in VARIANTS:
            total = len({r.nodeid for r in every if f"[{marker}{v}-" in r.nodeid})
            ok = len({r.nodeid for r in passed if f"[{marker}{v}-" in r.nodeid})
            if total:
                lines.append(f"{label} ({v}): {ok} of {total}")
    if lines:
        from tests.conformance.differences import INTENDED

        terminalreporter.write_sep("=", "conformance with the published Terminus-2")
        for line in lines:
            terminalreporter.write_line(line)
        terminalreporter.write_line(
            f"intended differences: parser {len(INTENDED['parser'])}, "
            + ", ".join(f"{k} {len(v)}" for k, v in INTENDED.items() if k != "parser")
            + " (tests/conformance/differences.py)"
        )
