"""The agent loop on a FAKE model (scripted replies) and a scripted terminal: caps, context, history.

The same loop runs against the published Terminus-2 in tests/conformance; these tests cover what
the comparison cannot: our own wording, the optional caps, eval.context: stop, history_thinking,
and bad input from the model or the endpoint.
"""

import json
import time

from horizon.eval.agent.loop import AgentConfig, _Loop, agent_deadline
from horizon.eval.agent.prompts import Template
from tests.conformance.harness import ScriptedModel, ScriptedTerminal, run_ours
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


class SlowModel(ScriptedModel):
    """FAKE model whose last answer takes `seconds` of wall-clock time (a model on a loaded CPU)."""

    def __init__(self, replies, seconds: float):
        super().__init__(replies)
        self.seconds = seconds

    def complete(self, messages, seed, max_tokens, timeout=None):
        if len(self.replies) == 1:
            time.sleep(self.seconds)
        return super().complete(messages, seed, max_tokens, timeout)


def test_the_agent_timeout_counts_the_models_time_and_the_config_overrides_the_tasks():
    """The crash test's CI failure in small: the same answers end at max_episodes under a generous timeout
    and as agent_timeout when the model's last answer outlasts the task's own timeout (the demo sets
    eval.agent_timeout_s for that reason). The first episodes are fast: the third starts well before the
    task's 0.5 s however loaded the machine."""
    sc = scenario([ans("ls\n")] * 3, [LS] * 3)
    ended = {}
    for name, cfg in (
        ("task's", AgentConfig(max_episodes=3)),
        ("config's", AgentConfig(max_episodes=3, agent_timeout=60)),
    ):
        loop = _Loop(
            ScriptedTerminal(sc), SlowModel(sc["replies"], 1.0), DEMO, cfg, 0, agent_deadline(cfg, 0.5), []
        )
        res = loop.run("x", "$ ")
        ended[name] = (res.ended, res.episodes, [m["content"] for m in res.messages])
    assert ended["task's"][0] == "agent_timeout" and ended["config's"][0] == "max_episodes"
    assert ended["task's"][1:] == ended["config's"][1:]  # the same episodes and messages either way
    assert agent_deadline(AgentConfig(), None) - time.monotonic() > 365 * 86400  # neither: no deadline


def test_the_demos_agent_timeout_is_above_its_tasks():
    """On 2 shared cores the model's time depends on the machine's load: the demo's table must not turn on
    the tasks' own 120 s."""
    from horizon.config import load
    from horizon.eval.rollout import agent_config
    from horizon.eval.settings import EvalSettings
    from horizon.eval.tasks.benchmark import load_harbor

    agent = agent_config(EvalSettings.from_config(load(REPO / "demo" / "config.yaml")["eval"]))
    for where, n in (("tasks", 12), ("train-tasks", 6)):  # evaluated, and DMPO's preference rollouts
        tasks = [load_harbor(d) for d in sorted((REPO / "demo" / where).iterdir()) if d.is_dir()]
        assert len(tasks) == n and agent.agent_timeout >= 5 * max(t.agent_timeout for t in tasks), where
