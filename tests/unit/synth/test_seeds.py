"""Synthesis seeds: Q&A records quarantined with their line numbers, bad scores, duplicates and domains."""

import json

import pytest

from horizon.synth.seeds import load_seeds, read_qa
from tests.helpers import FIXTURES

SEEDS = FIXTURES / "synth" / "seeds.jsonl"


def test_seeds_quarantine_rows_with_their_line_numbers():
    s = read_qa(SEEDS, min_score=5)
    assert [x.id for x in s.seeds] == ["so-101", "so-102", "so-103", "so-104", "so-105", "so-106"]
    assert s.below_min_score == ["so-108"]
    assert [(q["line"], q["reason"]) for q in s.quarantine] == [
        (7, "missing field(s) accepted_answer"),
        (8, "not JSON (Expecting value: line 1 column 1 (char 0))"),
    ]
    assert s.counts() == {"seeds": 6, "quarantined": 2, "below_min_score": 1}
    assert s.seeds[0].tags == ("bash", "wc") and s.seeds[0].score == 41


def test_seeds_bad_scores_duplicates_and_domains(tmp_path):
    f = tmp_path / "s.jsonl"
    rows = [{"id": 1, "question": "q", "accepted_answer": "a", "score": "many"},
            {"id": 2, "question": "q", "accepted_answer": "a", "score": 3}, [1, 2],
            {"id": 2, "question": "q", "accepted_answer": "a", "score": 3}]  # fmt: skip
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    s = load_seeds(f, {"Text processing": 2}, min_score=0)
    assert [x.id for x in s.seeds] == ["so-2", "text-processing-0", "text-processing-1"]
    assert [q["reason"] for q in s.quarantine] == [
        "score 'many' is not a number", "the row is not a JSON object", "duplicate id so-2"]  # fmt: skip
    with pytest.raises(ValueError, match="also a Q&A seed"):
        load_seeds(f, {"so": 3}, min_score=0)  # so-2 twice
