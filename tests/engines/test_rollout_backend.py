"""Rollout jobs through the in-process generation engine (real sandboxes): the attempts do not depend on
the run, the concurrency, or whether the KV cache and batching are on."""

import json

import pytest

from horizon.eval.agent.loop import AgentConfig
from horizon.eval.agent.prompts import Template
from horizon.eval.attempt import RunContext
from horizon.eval.models.backends import TransformersBackend
from horizon.eval.rollout import run_repeat
from horizon.eval.tasks.benchmark import load_harbor
from tests.helpers import REPO

pytestmark = pytest.mark.engine

BEHAVIOUR = ("success", "episodes", "prompt_tokens", "completion_tokens", "failure_mode", "ended",
             "first_complete_episode", "parse_errors", "error_signatures")  # fmt: skip


def rollout(student, tools, out, concurrency: int, fast: bool = True) -> list[dict]:
    """Two demo tasks x 3 attempts, sampled at 0.6; the random-init student never answers valid JSON, so
    each attempt is three episodes of parse errors, each after the "too long" re-asks of answers cut at
    max_tokens (each prompt extends the previous one)."""
    tasks = [load_harbor(REPO / "demo" / "tasks" / t) for t in ("word-count", "count-rows")]
    backend = TransformersBackend(student, student, temperature=0.6, top_p=0.95, kv_cache=fast, batching=fast)
    cfg = AgentConfig(max_episodes=5, context_length=2048, max_tokens=40, max_consecutive_parse_errors=3)
    ctx = RunContext(
        "local", backend, Template.load(REPO / "demo" / "prompt.yaml"), cfg, [], {"toolchain": tools}
    )
    try:
        run_repeat(tasks, 3, 0, ctx, out / "attempts.jsonl", seed=7, concurrency=concurrency)
    finally:
        backend.close()
    recs = [json.loads(x) for x in (out / "attempts.jsonl").read_text().splitlines()]
    for r in recs:
        r["messages"] = json.loads(open(r["transcript"]).read())["messages"]
    return recs


def behaviour(recs: list[dict]) -> list[dict]:
    return [{k: r[k] for k in ("task", "attempt", *BEHAVIOUR, "messages")} for r in recs]


def test_attempts_do_not_depend_on_the_run_the_concurrency_or_the_engine(tiny_corpus, tools, tmp_path):
    student = tiny_corpus / "student"
    first = rollout(student, tools, tmp_path / "a", concurrency=3)
    assert behaviour(rollout(student, tools, tmp_path / "b", concurrency=3)) == behaviour(first)  # run to run
    assert behaviour(rollout(student, tools, tmp_path / "c", concurrency=1)) == behaviour(
        first
    )  # no batching
    plain = rollout(student, tools, tmp_path / "d", concurrency=3, fast=False)
    assert behaviour(plain) == behaviour(first)  # one generate() per episode
    assert all(r["episodes"] == 3 and r["ended"] == "parse_exhausted" for r in first)
    for r in first:  # each model call after the first reused the attempt's cache (misses here: the random
        # student's answers are cut at max_tokens and asked again, or re-encode to other tokens, so only
        # the common prefix is reused)
        c = r["cache"]
        assert c["hits"] + c["misses"] == r["model_calls"] - 1 and c["reused_tokens"] > 0
    assert all("cache" not in r for r in plain)
    assert [r["cache"] for r in first] == [r["cache"] for r in rollout(student, tools, tmp_path / "e", 2)]
