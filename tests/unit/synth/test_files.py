"""A synthesis stage's answer as files, and the reviewer's verdict."""

import re

import pytest

from horizon.synth.files import BadAnswer, parse_files, parse_review


def test_answer_as_files():
    ans = (
        '<think>\n<file path="x">no</file>\n</think>\n<file path="environment/Dockerfile">\nFROM x\n</file>\n'
    )
    assert parse_files(ans, ("environment/Dockerfile",), ("environment",)) == {
        "environment/Dockerfile": "FROM x\n"
    }
    for bad, why in [
        ("Sure, here is a Dockerfile: FROM x", "no <file path"),
        ('<file path="environment/Dockerfile">FROM x', "not closed"),
        ('<file path="../etc/passwd">x</file>', "not a relative path"),
        ('<file path="/environment/Dockerfile">x</file>', "not a relative path"),
        ('<file path="tests/test.sh">x</file>', "outside what this stage writes"),
        ('<file path="environment/files/a.txt">x</file>', "required file(s) missing: environment/Dockerfile"),
    ]:
        with pytest.raises(BadAnswer, match=re.escape(why)):
            parse_files(bad, ("environment/Dockerfile",), ("environment",))


def test_review_verdicts():
    assert parse_review('{"approve": true}') == (True, [])
    assert parse_review('<think>hm</think>{"approve": false, "findings": ["a"]}') == (False, ["a"])
    for bad in [
        "looks good",
        '{"approve": "yes"}',
        '{"approve": false}',
        '{"approve": false, "findings": [1]}',
    ]:
        with pytest.raises(BadAnswer):
            parse_review(bad)
