"""The prompt template recovered from the fixture corpus reproduces its turns."""

import re

from horizon.eval.agent.extract import extract
from tests.helpers import fixture_rows


def test_extract_from_the_fixture_corpus_reproduces_its_turns():
    convs = [r["conversations"] for r in fixture_rows()]
    t = extract(convs, "mark the task as complete")
    row = convs[0]
    first = row[0]["content"]
    instruction = "Write the number of lines of /app/data.csv (without header) to /app/count.txt."
    screen = first.split("Current terminal state:\n", 1)[1]
    assert t.first(instruction, screen) == first
    assert t.render("terminal_screen", screen="root@box:/app# \n") == screen
    obs = row[2]["content"]
    assert t.render("terminal_new", output=obs.split("\n", 1)[1]) == obs
    assert t.render("observation", output=obs) == obs
    assert (
        t.render("confirm", output=row[8]["content"].split("\n", 1)[1].split("\n\n")[0]) == row[8]["content"]
    )
    err = row[4]["content"].split("\n")[1]
    assert re.sub(r"\n+", "\n", t.render("parse_error", error=err)) == re.sub(r"\n+", "\n", row[4]["content"])
    assert t.sources["initial"] == t.sources["confirm"] == "corpus"
    assert t.sources["summary_request"] == "horizon"  # no reference package given: generic wording
