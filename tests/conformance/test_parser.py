"""Our parser against both published Terminus-2 parsers, case by case (ids contain `parser`).

Same commands (keystrokes, duration), same task_complete (value and type), same error class and
the same warning classes in the same order. Their messages are classified by the calibration
exemplars (cases.EXEMPLARS): each of their messages is matched to the exemplar message it shares
the longest prefix with (digits aside), so no wording of theirs is written down here.
"""

from __future__ import annotations

import json
import re

import pytest

from horizon.terminus import ERROR_CODES, Issue, answer_view, parse, parse_answer
from tests.conformance.cases import EXEMPLARS, PARSER_CASES
from tests.conformance.conftest import VARIANTS

MIN_PREFIX = 12  # a shorter shared prefix is no evidence of a class


def our_key(issue: Issue) -> tuple:
    return (issue.code, issue.args[0]) if issue.code in ("field_not_string", "auto_fixed") else (issue.code,)


def items(warning: str) -> list[str]:
    """Their warning text as separate warnings."""
    return warning[2:].split("\n- ") if warning else []


def _norm(msg: str) -> str:
    return re.sub(r"\d+", "#", msg)


def _prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


@pytest.fixture(scope="module")
def calibration(reference) -> dict[str, dict[tuple, str]]:
    """{variant: {our key: their message}} from the exemplars."""
    table = {}
    for v in VARIANTS:
        t = {}
        for key, res in reference[v]["exemplars"].items():
            if key[0] in ERROR_CODES:
                t[key] = res["error"]
            else:
                t[key] = items(res["warning"])[0]
            if key == ("no_json",):
                t[("no_json_object",)] = items(res["warning"])[0]
        table[v] = t
    return table


def classify(msg: str, table: dict[tuple, str]) -> tuple:
    scored = sorted(((_prefix(_norm(msg), _norm(m)), key) for key, m in table.items()), reverse=True)
    (best, key), (second, _) = scored[0], scored[1]
    if best < MIN_PREFIX or best == second:
        return ("unclassified", msg)
    return key


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("key", list(EXEMPLARS), ids=lambda k: "-".join(k))
def test_calibration_exemplars(reference, variant, key):
    """Each exemplar is one issue for our parser and one message for theirs."""
    ours = parse_answer(EXEMPLARS[key], variant)
    found = [ours.error] if ours.error else ours.warnings
    assert [our_key(i) for i in found] == [key]
    theirs = reference[variant]["exemplars"][key]
    if key[0] in ERROR_CODES:
        assert theirs["error"]
    else:
        assert not theirs["error"] and len(items(theirs["warning"])) == 1


CASE_IDS = [f"parser-{v}-{c.id}" for v in VARIANTS for c in PARSER_CASES]


@pytest.mark.parametrize(("variant", "case"), [(v, c) for v in VARIANTS for c in PARSER_CASES], ids=CASE_IDS)
def test_parser_agrees(reference, calibration, variant, case):
    assert answer_view(case.text) == case.reference_input(), (
        f"our view is not what the case says ({case.sees})"
    )
    ours = parse_answer(case.reference_input(), variant)
    assert parse(case.text, variant) == ours
    theirs = reference[variant]["parse"][case.id]
    table = calibration[variant]
    assert json.dumps([[c.keystrokes, c.duration] for c in ours.commands]) == json.dumps(theirs["commands"])
    assert json.dumps(ours.complete_value) == json.dumps(theirs["complete"])
    assert ours.task_complete == theirs["truthy"]
    their_error = classify(theirs["error"], table) if theirs["error"] else None
    assert (our_key(ours.error) if ours.error else None) == their_error, theirs["error"]
    their_warnings = [classify(w, table) for w in items(theirs["warning"])]
    assert [our_key(w) for w in ours.warnings] == their_warnings, theirs["warning"]
    for ours_w, theirs_w in zip(ours.warnings, items(theirs["warning"])):
        if ours_w.code in ("duration_missing", "duration_invalid", "unknown_fields", "missing_newline"):
            assert re.search(r"\d+", theirs_w)[0] == str(ours_w.args[0])  # the same command number


def test_the_suite_covers_every_class(reference, calibration):
    """Every error and warning class of ours shows up in at least one case."""
    seen = set()
    for c in PARSER_CASES:
        r = parse_answer(c.reference_input())
        seen.update(i.code for i in ([r.error] if r.error else []) + r.warnings)
    assert ERROR_CODES - {"not_object"} <= seen  # a JSON object is all the brace scan can find
    assert {"text_before", "text_after", "field_not_string", "field_order", "task_complete_type",
            "duration_missing", "duration_invalid", "unknown_fields", "missing_newline", "auto_fixed",
            "no_json_object"} <= seen  # fmt: skip
    assert len(PARSER_CASES) >= 60
