import pytest

from horizon.eval.agent.prompts import GENERIC, KINDS, Template, fill
from tests.helpers import REPO


def test_demo_template_loads_and_renders():
    t = Template.load(REPO / "demo" / "prompt.yaml")
    first = t.first("Do X.", "root@box:/app# ")
    assert "Task Description:\nDo X.\n" in first and first.endswith("root@box:/app# ")
    assert '{"keystrokes", "duration"}' in first  # braces that are not placeholders survive
    assert "mark the task as complete" in t.render("confirm", output="$")
    assert t.render("warnings", warnings="- w1", output="out") == "Warnings:\n- w1\n\nout"
    assert t.sources["initial"] == "demo" and t.sources["summary_request"] == "horizon"
    assert set(t.turns) == set(KINDS)


def test_fill_is_one_pass():
    assert fill("{a} and {b}", a="{b}", b="B") == "{b} and B"  # a value holding a placeholder stays
    assert fill("{x} {unknown}", x=1) == "1 {unknown}"


@pytest.mark.parametrize(
    "data, message",
    [
        ({"initial": "x"}, "not a format-2 prompt template"),
        ({"format": 2, "observation": "{output}"}, "`initial` .* is required"),
        ({"format": 2, "initial": "no placeholders"}, r"`initial` lacks the placeholder \{instruction\}"),
        ({"format": 2, "initial": "{instruction}{screen}", "confirm": "no output"}, "`confirm` lacks"),
        ({"format": 2, "initial": "{instruction}{screen}", "bogus": "x"}, "unknown key"),
        ({"format": 2, "initial": "{instruction}{screen}", "loop": {"nope": 1}}, "unknown `loop` key"),
    ],
)
def test_template_errors_name_the_key(tmp_path, data, message):
    import yaml

    p = tmp_path / "t.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match=message):
        Template.load(p)


def test_save_load_roundtrip(tmp_path):
    t = Template.load(REPO / "demo" / "prompt.yaml")
    t.save(tmp_path / "t.yaml")
    assert Template.load(tmp_path / "t.yaml") == t


def test_generic_wording_has_every_placeholder():
    from horizon.eval.agent.prompts import PLACEHOLDERS

    for kind, text in GENERIC.items():
        assert all("{" + p + "}" in text for p in PLACEHOLDERS[kind]), kind
