import pytest

from horizon.eval.prompts import Template, extract
from tests.helpers import REPO, fixture_rows


def test_demo_template_loads_and_renders():
    t = Template.load(REPO / "demo" / "prompt.yaml")
    first = t.first("Do X.", "root@box:/app# ")
    assert "Task Description:\nDo X.\n" in first and first.endswith("root@box:/app# ")
    assert '{"keystrokes", "duration"}' in first  # braces that are not placeholders survive
    assert "mark the task as complete" in t.after("confirm", output="$")
    assert t.after("observation", ["w1"], output="out").startswith(
        "Warnings:\n- w1\n\nNew Terminal Output:\nout"
    )


def test_template_missing_placeholder_is_an_error(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text(
        "initial: 'no placeholders'\nobservation: '{output}'\nconfirm: '{output}'\nparse_error: '{error}'\n"
    )
    with pytest.raises(ValueError, match="`initial` lacks the placeholder {instruction}"):
        Template.load(p)


def test_extract_from_the_fixture_corpus_reproduces_its_turns():
    convs = [r["conversations"] for r in fixture_rows()]
    t = extract(convs, "mark the task as complete")
    row = convs[0]
    first = row[0]["content"]
    instruction = "Write the number of lines of /app/data.csv (without header) to /app/count.txt."
    screen = first.split("Current terminal state:\n", 1)[1]
    assert t.first(instruction, screen) == first
    assert t.after("observation", output=row[2]["content"].split("\n", 1)[1]) == row[2]["content"]
    err = row[4]["content"].split("\n")[1]
    assert t.after("parse_error", error=err) == row[4]["content"]
    out = row[8]["content"].split("New Terminal Output:\n", 1)[1].split("\n\n")[0]
    assert t.after("confirm", output=out) == row[8]["content"]
