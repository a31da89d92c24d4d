"""The Terminus-2 response parser (its agreement with the published one: tests/conformance)."""

import pytest

from horizon.terminus import (
    Command,
    ParseError,
    answer_view,
    parse,
    parse_answer,
    parse_response,
    render_response,
)


def codes(r):
    return [i.code for i in ([r.error] if r.error else []) + r.warnings]


def test_valid_with_thinking():
    r = parse_response(
        '<think>\n{"not": "this"}\n</think>\n\n{"analysis": "a", "plan": "p", "commands": '
        '[{"keystrokes": "ls\\n", "duration": 0.5}], "task_complete": false}'
    )
    assert r.commands == [Command("ls\n", 0.5)] and not r.task_complete and not r.warnings


@pytest.mark.parametrize(
    "text, view",
    [
        ("<think>r</think>\n\n{}", "\n\n{}"),
        ("pre <think>r</think>x", "x"),  # text before <think> is dropped with it
        ("<think>never closed {}", "<think>never closed {}"),  # no split: the raw text
        ("r</think>x", "r</think>x"),  # no <think>: the raw text
        ("<think>a</think>b</think>c", "b</think>c"),
        (None, ""),
    ],
)
def test_answer_view_is_what_a_reasoning_parser_hands_over(text, view):
    assert answer_view(text) == view


def test_first_object_and_text_around_it():
    text = '{"analysis": "a } {", "plan": "p", "commands": [], "task_complete": true} trailing {"x": 1}'
    r = parse_response(text)
    assert r.task_complete and r.analysis == "a } {" and codes(r) == ["text_after"]


@pytest.mark.parametrize(
    "text, code",
    [
        ("no json here", "no_json"),
        ('{"analysis": "a", "plan": "p"}', "missing_fields"),
        ('{"analysis": "a", "plan": "p", "commands": "ls"}', "commands_not_array"),
        ('{"analysis": "a", "plan": "p", "commands": [{"duration": 1}]}', "command_no_keystrokes"),
        ('{"analysis": "a", "plan": "p", "commands": ["ls"]}', "command_not_object"),
        ('{"analysis": "a", "plan": "p", "commands": [{"keystrokes": 1}]}', "keystrokes_not_string"),
        ('{"analysis": "a", "plan": "p", "commands": [],,}', "invalid_json"),
        ('{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "x", "duration": 1}', "no_json"),
    ],
)
def test_errors(text, code):
    with pytest.raises(ParseError) as e:
        parse_response(text)
    assert e.value.response.error.code == code and str(e.value)


@pytest.mark.parametrize(
    "value, complete, warned",
    [(True, True, False), ("yes", True, False), ("TRUE", True, False), ("1", True, False), ("no", False, False),
     (1, 1, True), (0, 0, True), (None, None, False), ([], [], True)],
)  # fmt: skip
def test_task_complete_values_are_taken_as_terminus_2_does(value, complete, warned):
    import json

    r = parse(json.dumps({"analysis": "a", "plan": "p", "commands": [], "task_complete": value}))
    assert r.error is None and r.complete_value == complete and r.task_complete == bool(complete)
    assert ("task_complete_type" in codes(r)) == warned


def test_repairs_are_warnings():
    r = parse('{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n", "duration": 1}]')
    assert r.error is None and r.warnings[0].code == "auto_fixed" and r.commands == [Command("ls\n", 1.0)]
    r = parse('{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n", "duration": 1}')  # no ]
    assert r.error.code == "no_json"  # the repair did not help: the first verdict stands


def test_durations_and_command_warnings():
    r = parse(
        '{"analysis": 1, "plan": "p", "commands": [{"keystrokes": "a"}, {"keystrokes": "b\\n", "duration": "5",'
        ' "x": 1}, {"keystrokes": "c\\n", "duration": -3}]}'
    )
    assert [c.duration for c in r.commands] == [1.0, 1.0, -3.0]
    assert codes(r) == [
        "field_not_string",
        "duration_missing",
        "missing_newline",
        "duration_invalid",
        "unknown_fields",
    ]


def test_a_broken_command_costs_only_the_commands_when_complete():
    r = parse('{"analysis": "a", "plan": "p", "commands": [{"duration": 1}], "task_complete": true}')
    assert r.error is None and r.task_complete and r.commands == [] and codes(r) == ["command_no_keystrokes"]


def test_the_two_variants_differ_in_one_warning():
    text = '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": ""}, {"keystrokes": "ls\\n"}]}'
    assert "missing_newline" not in codes(parse(text, "harbor"))
    assert "missing_newline" in codes(parse(text, "tb1"))
    with pytest.raises(ValueError, match="unknown Terminus-2 parser variant"):
        parse(text, "xml")


def test_an_unclosed_think_is_parsed_whole():
    r = parse('<think>\nhmm\n{"analysis": "a", "plan": "p", "commands": []}')
    assert r.error is None and codes(r) == ["text_before"]


def test_render_roundtrip():
    text = render_response("a", "p", [Command("echo ✓\n", 0.1)], True, reasoning="think")
    r = parse_response(text)
    assert text.startswith("<think>\nthink\n</think>\n\n{")
    assert r.commands == [Command("echo ✓\n", 0.1)] and r.task_complete and not r.warnings


def words(r):
    """What the model is told: the error, then each warning, in their order."""
    return [str(i) for i in ([r.error] if r.error else []) + r.warnings]


def test_warnings_are_worded_with_their_item_and_fields():
    r = parse(
        '{"plan": "p", "analysis": 1, "commands": [{"keystrokes": "ls", "x": 1, "a": 2}, '
        '{"keystrokes": "cd /\\n", "duration": "2"}, {"keystrokes": "pwd"}]}'
    )
    assert words(r) == [
        "`analysis` should be text.",
        "The fields came as plan, analysis, commands; expected analysis, plan, commands.",
        "Item 1 has no `duration`; 1.0 s was used.",
        "Item 1 has fields this format does not know: a, x.",
        "Item 1 does not end with a newline, so the next item is typed on the same line.",
        "Item 2 has a `duration` that is not a number; 1.0 s was used.",
        "Item 3 has no `duration`; 1.0 s was used.",  # the last item may lack its newline
    ]
    missing = parse('say {"analysis": "a"}')
    assert words(missing) == [
        "These fields are required but absent: plan, commands.",
        "There is text before the JSON object.",
    ]
    # a key the text spells with an escape is not found by its name: the two found are compared
    assert codes(parse('{"commands": [], "plan": "p", "\\u0061nalysis": "a"}')) == ["field_order"]


def test_parse_error_says_what_the_model_is_told_and_variants_are_passed_on():
    with pytest.raises(ParseError, match=r"^The answer holds no complete JSON object\.$") as e:
        parse_response("no object here")
    assert e.value.response.error.code == "no_json"
    wait_then_ls = '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "", "duration": 1}, {"keystrokes": "ls\\n", "duration": 1}]}'  # noqa: E501
    assert codes(parse_response(wait_then_ls)) == [] and codes(parse_answer(wait_then_ls)) == []  # harbor
    assert codes(parse_response(wait_then_ls, "tb1")) == ["missing_newline"]
    with pytest.raises(ValueError, match=r"^unknown Terminus-2 parser variant 'tb2' \(one of harbor, tb1\)$"):
        parse_answer("{}", "tb2")


def test_the_two_repairs_are_named_first_among_the_warnings():
    from horizon.terminus import Issue

    # one `}` missing with a `}` already present: exactly one is appended (no text after the object)
    cut = '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n"}]'
    assert words(parse(cut)) == [
        "The answer was repaired (closing braces added); please send well-formed JSON.",
        "Item 1 has no `duration`; 1.0 s was used.",
    ]
    # balanced braces, the first span invalid: the first valid span of depth <= 2 is taken, under the variant
    valid = '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "", "duration": 1}, {"keystrokes": "ls\\n"}]}'
    text = "say {not json} then " + valid + " end"
    for variant, extra in (("harbor", []), ("tb1", ["missing_newline"])):
        r = parse(text, variant)
        assert codes(r) == ["auto_fixed", *extra, "duration_missing"] and r.commands[1] == Command("ls\n")
    assert (
        str(parse(text).warnings[0])
        == "The answer was repaired (object extracted); please send well-formed JSON."
    )
    # spans are tried from the text's first character, one character at a time, each up to its own end;
    # the first span that is JSON is the one taken, an answer or not
    assert parse('{"x": 1} ' + valid).error == Issue("missing_fields", ("analysis", "plan", "commands"))
    for gap in (" ", "  "):
        assert codes(parse("say {not json}" + gap + valid))[0] == "auto_fixed"
    # a `{` that never closes within two levels is passed by one character: the object right after it is taken
    opened = parse("say {" + valid + "!")
    assert codes(opened) == ["auto_fixed", "duration_missing"] and opened.commands[1] == Command("ls\n")
    # an object nested three deep is never taken whole (its inner span is, and lacks the fields)
    deep = 'say {not json} {"analysis": "a", "plan": {"x": {"y": 1}}, "commands": []}'
    assert parse(deep).error.code == "invalid_json"


def test_a_backslash_hides_the_next_character_also_in_prose():
    # inside a string an escaped quote does not end it, so the `}` after it is text
    r = parse('{"analysis": "a \\" } b", "plan": "p", "commands": []}')
    assert r.error is None and r.analysis == 'a " } b' and codes(r) == []
    # in prose, a backslash hides a `{`: the object is the next one
    r = parse('note \\{ {"analysis": "a", "plan": "p", "commands": []}')
    assert r.error is None and codes(r) == ["text_before"]


def test_render_response_is_the_canonical_text():
    assert render_response("é", "p", [Command("ls\n", 0.5)]) == (
        '{\n  "analysis": "é",\n  "plan": "p",\n  "commands": [\n    {\n      "keystrokes": "ls\\n",\n'
        '      "duration": 0.5\n    }\n  ],\n  "task_complete": false\n}'
    )


def test_a_failed_answer_runs_nothing_and_keeps_what_it_said():
    from horizon.terminus import Issue, Response

    assert parse("no object") == Response([], False, Issue("no_json"), [Issue("no_json_object")])
    bad = parse('text {"analysis": } more')
    assert (bad.commands, bad.complete_value, bad.error.code, codes(bad)[1:]) == (
        [], False, "invalid_json", ["text_before", "text_after"]
    )  # fmt: skip
    assert bad.error.args[1] == '{"analysis": }' and "Expecting value" in bad.error.args[0]
    assert parse('{"analysis": "a", "plan": "p", "commands": {}, "task_complete": true}') == Response(
        [], False, Issue("commands_not_array"), []
    )
    broken = '{"analysis": "a", "plan": "p", "commands": [{"duration": 1}]'
    assert parse(broken + "}") == Response([], False, Issue("command_no_keystrokes", (1,)), [], "a", "p")
    done = parse(broken + ', "task_complete": true}')
    assert done == Response([], True, None, [Issue("command_no_keystrokes", (1,))], "a", "p")
    ok = parse('{"analysis": "a", "plan": "p", "commands": []}x')
    assert ok == Response([], False, None, [Issue("text_after")], "a", "p")  # absent task_complete: False


def test_answer_view_splits_at_the_first_think_and_the_first_end_after_it():
    assert answer_view("<think>a<think>b</think>c") == "c"
    assert answer_view("<think>x</think>y<think>z") == "y<think>z"
