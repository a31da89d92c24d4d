"""Grading and failure attribution without a sandbox: strict rewards, failure modes by evidence."""

import pytest

from horizon.eval.agent.loop import AgentResult
from horizon.eval.attempt import failure_mode
from horizon.eval.grading.grader import Grade, parse_reward
from horizon.eval.sandbox import Diagnosis


@pytest.mark.parametrize(
    "name, text, value",
    [("reward.txt", "1\n", 1.0), ("reward.txt", " 0.5 ", 0.5), ("reward.json", '{"reward": 1, "other": 3}', 1.0),
     ("reward.json", '{"reward": 0.25}', 0.25),
     ("reward.json", '{"score": 1}', 1.0),  # Harbor: a single key is the reward, whatever its name
     ("reward.json", '{"reward": true}', 1.0)],  # Harbor: a JSON true passes as 1
)  # fmt: skip
def test_valid_rewards(name, text, value):
    r = parse_reward(name, text)
    assert (r.value, r.file, r.error) == (value, name, None)


@pytest.mark.parametrize(
    "name, text, error",
    [
        ("reward.txt", "", "reward.txt: empty"),
        ("reward.txt", "1 passed", "reward.txt: '1 passed' is not a number"),  # not the first number it holds
        ("reward.txt", "nan", "reward.txt: nan is not a finite number"),
        ("reward.json", "1", "reward.json: expected an object of rewards, got '1'"),
        ("reward.json", '{"reward": "1"}', "reward.json: '1' is not a finite number"),
        ("reward.json", '{"reward": NaN}', "reward.json: nan is not a finite number"),
        (
            "reward.json",
            "{reward: 1}",
            "reward.json: not valid JSON (Expecting property name enclosed in double",
        ),
    ],
)
def test_invalid_rewards_are_named(name, text, error):
    r = parse_reward(name, text)
    assert r.value is None and r.file == name and r.error.startswith(error), r.error


def result(ended):
    return AgentResult(messages=[], episodes=1, ended=ended)


def grade_of(success=False, timed_out=False, failure=None):
    return Grade(success, float(success), timed_out, {}, "", failure)


@pytest.mark.parametrize(
    "grade, ended, mode",
    [
        (grade_of(success=True), "agent_timeout", "none"),
        (grade_of(timed_out=True), "completed", "test_timeout"),
        (grade_of(failure="sandbox_exhausted"), "completed", "sandbox_exhausted"),  # the tests could not run
        (grade_of(failure="sandbox_killed"), "terminal_lost", "sandbox_killed"),
        (grade_of(), "terminal_lost", "terminal_lost"),
        (grade_of(), "sandbox_exhausted", "sandbox_exhausted"),
        (grade_of(failure="reward_invalid"), "completed", "reward_invalid"),
        (grade_of(failure="reward_invalid"), "agent_timeout", "agent_timeout"),
        (grade_of(), "completed", "tests_failed"),
    ],
)
def test_failure_mode_from_the_grade_and_the_ending(grade, ended, mode):
    assert failure_mode(grade, result(ended)) == mode


def test_diagnoses_map_to_whose_failure_it_is():
    assert [
        (Diagnosis(s, "").failure_mode, Diagnosis(s, "").agents_doing)
        for s in ("exhausted", "killed", "lost")
    ] == [
        ("sandbox_exhausted", True),
        ("sandbox_killed", True),
        ("infra_error", False),
    ]
    assert not Diagnosis("healthy", "").agents_doing
