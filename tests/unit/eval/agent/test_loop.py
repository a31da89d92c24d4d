"""The agent loop on a FAKE model (scripted replies) and a scripted terminal: caps, context, history.

The same loop runs against the published Terminus-2 in tests/conformance; these tests cover what
the comparison cannot: our own wording, the optional caps, eval.context: stop, history_thinking,
and bad input from the model or the endpoint.
"""

import json

from horizon.eval.agent.prompts import Template
from tests.conformance.harness import run_ours
from tests.conformance.scenarios import LS, OBS, SUMMARY, ans, scenario
from tests.helpers import REPO

DEMO = Template.load(REPO / "demo" / "prompt.yaml")


def test_no_caps_by_default_and_confirmation_survives_a_parse_error():
    garbage = [{"text": "not json"}] * 40
    r = run_ours(
        scenario([*garbage, ans(done=True), {"text": "oops"}, ans(done=True)], [LS], max_episodes=None), DEMO
    )
    res = r["result"]
    assert r["end"] == "done" and res.ended == "completed" and res.parse_errors == 41 and res.episodes == 43


def test_optional_caps():
    r = run_ours(scenario([ans("ls\n")] * 10, [LS], max_episodes=3), DEMO)
    assert r["result"].ended == "max_episodes" and r["result"].episodes == 3
    sc = scenario([{"text": "nope"}] * 10, [LS])
    from horizon.eval.agent.loop import AgentConfig, _Loop
    from tests.conformance.harness import ScriptedModel, ScriptedTerminal

    loop = _Loop(ScriptedTerminal(sc), ScriptedModel(sc["replies"]), DEMO,
                 AgentConfig(max_consecutive_parse_errors=4), 0, 1e18, [])  # fmt: skip
    assert loop.run("x", "$ ").ended == "parse_exhausted" and loop.res.parse_errors == 4


def test_context_stop_ends_at_the_first_overflow():
    r = run_ours(
        scenario([ans("a\n"), ans("b\n"), ans("c\n"), ans("d\n")], OBS, limit=6000), DEMO, context="stop"
    )
    assert r["result"].ended == "context_length" and r["usage"].summarizations == 0


def test_summarize_with_our_own_wording():
    r = run_ours(
        scenario([ans("a\n"), ans("b\n"), ans("c\n"), *SUMMARY, ans("d\n"), ans()], OBS, limit=11500), DEMO
    )
    u = r["usage"]
    assert u.summarizations == 1 and u.summary_calls == 3 and u.calls == len(r["calls"])
    after = r["calls"][6]  # the call after the summary: [first turn, questions turn, questions, handoff]
    assert [m["role"] for m in after] == ["user", "user", "assistant", "user"]
    assert "SUMMARY of the work" in after[1]["content"] and "ANSWERS 1-5" in after[3]["content"]
    assert after[0] == r["calls"][0][0]


def test_a_failing_summary_is_recorded_not_a_crash():
    sc = scenario([ans("ls\n"), {"length": "x" * 40000}, {"fail": True}, {"fail": True}, ans(done=True),
                   ans(done=True)], [LS], limit=9000)  # fmt: skip
    r = run_ours(sc, DEMO)
    assert r["end"] == "done" and r["result"].ended == "completed"
    failed = [e for e in r["usage"].events if "summary_failed" in e]
    assert len(failed) == 2  # the full summary, then the short one; the fallback needs no model


def test_history_thinking_keep_or_drop():
    think = "<think>\nI will list {files}.\n</think>\n\n" + ans("ls\n")["text"]
    for mode, shown in (("keep", think), ("drop", "\n\n" + ans("ls\n")["text"])):
        sc = scenario([{"text": think}, ans()], [LS], reasoning=(mode == "drop"))
        r = run_ours(sc, DEMO)
        assert r["calls"][1][1] == {"role": "assistant", "content": shown}
        assert r["result"].messages[1]["content"] == think  # the transcript keeps the whole answer


def test_empty_and_unreadable_answers_are_parse_errors():
    r = run_ours(
        scenario([{"text": ""}, {"text": "\x00\ufffd{"}, ans(done=True), ans(done=True)], [LS]), DEMO
    )
    assert r["result"].ended == "completed" and r["result"].parse_errors == 2
    assert r["calls"][1][-1]["content"].startswith("Your answer could not be used:\n")


def test_output_too_long_in_our_wording():
    r = run_ours(scenario([{"length": '{"analysis": "a'}, ans(done=True), ans(done=True)], [LS]), DEMO)
    assert "limit of 4096 tokens" in r["calls"][1][-1]["content"] and r["keys"] == []


def test_transcript_is_json():
    r = run_ours(scenario([ans("ls\n"), ans(done=True), ans(done=True)], [LS]), DEMO)
    json.dumps(r["result"].messages)
    assert [m["role"] for m in r["result"].messages] == ["user", "assistant"] * 3
