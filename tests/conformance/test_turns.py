"""Every prompt-turn kind and the context management, byte for byte against the published loops.

Each scenario runs through their agent loop (reference_driver.py) and ours with the template
exported from their package (eval.prompt_template: terminus-2-harbor / terminus-2-tb1); every
message list sent to the model must be equal, and so must the keystrokes typed and how it ended.
"""

from __future__ import annotations

import difflib
import re

import pytest

from horizon.eval.agent.prompts import KINDS, Template
from tests.conformance.conftest import VARIANTS
from tests.conformance.harness import run_ours
from tests.conformance.scenarios import CONTEXT, TURNS, for_driver


def _diff(a: list[dict], b: list[dict]) -> str:
    left = [f"{m['role']}: {line}" for m in a for line in m["content"].split("\n")]
    right = [f"{m['role']}: {line}" for m in b for line in m["content"].split("\n")]
    return "\n".join(list(difflib.unified_diff(right, left, "theirs", "ours", lineterm="", n=1))[:40])


def compare(reference, variant: str, name: str, sc: dict) -> dict:
    template = Template.from_dict(reference[variant]["template"], origin=f"terminus-2-{variant}")
    ours = run_ours(for_driver(sc), template)
    theirs = reference[variant]["loops"][name]
    sent = [c["messages"] for c in theirs["calls"] if not c["overflow"]]
    for i, (a, b) in enumerate(zip(ours["calls"], sent)):
        assert a == b, f"model call {i} differs:\n{_diff(a, b)}"
    assert len(ours["calls"]) == len(sent), f"{len(ours['calls'])} model calls here, {len(sent)} there"
    assert ours["keys"] == theirs["keys"]
    assert ours["end"] == theirs["end"].split(":")[0], (ours["end"], theirs["end"])
    return ours


def _counts(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"; (\d+) interior bytes omitted", text)]


# what each scenario must have exercised (so that agreement is not agreement on nothing)
SHOWN = {
    # an observation is cut twice (the count shown is that of the second cut: 70 here, 71 for ASCII), the
    # confirmation once (the real count)
    "long-output": lambda r: (
        0 < _counts(r["calls"][1][-1]["content"])[0] < 100
        and _counts(r["calls"][2][-1]["content"])[0] > 20_000
    ),
    "timeout": lambda r: (
        "sleep 100" in r["calls"][1][-1]["content"] and "5.0" in r["calls"][1][-1]["content"]
    ),
    "durations": lambda r: r["keys"] == [["a\n", 60], ["b\n", 60], ["c\n", -1.0]],
    "confirmation-survives-parse-error": lambda r: r["end"] == "done" and len(r["calls"]) == 3,
    "proactive-summary": lambda r: r["usage"].summarizations == 1 and r["usage"].summary_calls == 3,
    "proactive-summary-twice": lambda r: r["usage"].summarizations == 2,
    "overflow-after-cut-answer": lambda r: any("overflow" in e for e in r["usage"].events),
}


@pytest.mark.parametrize(
    ("variant", "name"), [(v, n) for v in VARIANTS for n in TURNS],
    ids=[f"turn-{v}-{n}" for v in VARIANTS for n in TURNS],
)  # fmt: skip
def test_prompt_turn(reference, variant, name):
    ours = compare(reference, variant, name, TURNS[name])
    if name in SHOWN:
        assert SHOWN[name](ours)


CONTEXT_RUNS = [(v, n) for v in VARIANTS for n, sc in CONTEXT.items() if v in sc.get("variants", VARIANTS)]


@pytest.mark.parametrize(("variant", "name"), CONTEXT_RUNS, ids=[f"context-{v}-{n}" for v, n in CONTEXT_RUNS])
def test_context_management(reference, variant, name):
    ours = compare(reference, variant, name, CONTEXT[name])
    if name in SHOWN:
        assert SHOWN[name](ours)


@pytest.mark.parametrize("variant", VARIANTS, ids=[f"export-{v}" for v in VARIANTS])
def test_exported_template_holds_their_wording(reference, variant):
    t = Template.from_dict(reference[variant]["template"], origin=variant)
    theirs = {k for k, src in t.sources.items() if src == f"terminus-2-{variant}"}
    harbor_only = {"short_summary_request", "short_handoff", "fallback_handoff"}
    assert theirs == (set(KINDS) if variant == "harbor" else set(KINDS) - harbor_only)
    assert t.parser_module and t.parser_module.endswith("terminus_json_plain_parser.py")
