"""Corpus extraction with the reference package installed: kinds the corpus lacks use its wording."""

from __future__ import annotations

from horizon.eval.agent.extract import extract
from horizon.eval.agent.prompts import Template
from tests.helpers import fixture_rows


def test_kinds_the_corpus_lacks_come_from_the_package(reference):
    convs = [r["conversations"] for r in fixture_rows()]
    package = Template.from_dict(reference["harbor"]["template"], origin="terminus-2-harbor")
    t = extract(convs, "mark the task as complete", fallback=package)
    assert {k for k, v in t.sources.items() if v == "corpus"} >= {"initial", "terminal_screen", "terminal_new",
                                                                 "confirm"}  # fmt: skip
    for kind in ("summary_request", "questions", "handoff", "output_too_long", "timeout", "truncation"):
        assert t.sources[kind] == "terminus-2-harbor" and t.turns[kind] == package.turns[kind]
    assert t.parser_module == package.parser_module and t.loop == package.loop
    first = convs[0][0]["content"]
    assert t.first("Write the number of lines of /app/data.csv (without header) to /app/count.txt.",
                   first.split("Current terminal state:\n", 1)[1]) == first  # fmt: skip
