import pytest

from horizon.terminus import Command, ParseError, parse_response, render_response


def test_valid_with_thinking():
    r = parse_response(
        '<think>\n{"not": "this"}\n</think>\n\n{"analysis": "a", "plan": "p", "commands": '
        '[{"keystrokes": "ls\\n", "duration": 0.5}], "task_complete": false}'
    )
    assert r.commands == [Command("ls\n", 0.5)] and not r.task_complete and not r.warnings


def test_first_balanced_object_with_braces_in_strings():
    text = '{"analysis": "a } {", "plan": "p", "commands": [], "task_complete": true} trailing {"x": 1}'
    r = parse_response(text)
    assert r.task_complete and r.analysis == "a } {"
    assert any("after" in w for w in r.warnings)


@pytest.mark.parametrize(
    "text, message",
    [
        ("no json here", "No JSON object"),
        ('{"analysis": "a", "plan": "p", "commands": [', "not closed"),
        ('{"analysis": "a", "plan": "p"}', "Missing required field(s): commands"),
        ('{"analysis": "a", "plan": "p", "commands": "ls"}', "must be a list"),
        ('{"analysis": "a", "plan": "p", "commands": [{"duration": 1}]}', "keystrokes"),
        ('{"analysis": "a", "plan": "p", "commands": [], "task_complete": 3}', "boolean"),
        ('{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "x", "duration": -1}]}', "duration"),
        ("<think>\nstill thinking", "not closed with </think>"),
        ('{"analysis": "a", "plan": "p", "commands": [],}', "Invalid JSON"),
    ],
)
def test_errors(text, message):
    with pytest.raises(ParseError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_response(text)


def test_missing_duration_is_a_warning():
    r = parse_response('{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n"}]}')
    assert r.commands[0].duration == 1.0 and "duration" in r.warnings[0]


def test_render_roundtrip():
    text = render_response("a", "p", [Command("echo ✓\n", 0.1)], True, reasoning="think")
    r = parse_response(text)
    assert text.startswith("<think>\nthink\n</think>\n\n{")
    assert r.commands == [Command("echo ✓\n", 0.1)] and r.task_complete
