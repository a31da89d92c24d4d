#!/usr/bin/env python
"""Harness overhead per attempt (local sandbox, scripted model), and 1 vs 4 concurrent attempts.

  python bench/rollout.py [--attempts 16]

A scripted model solves a bundled task in 3 episodes with 0.1 s command durations; overhead =
attempt wall time minus those scripted waits (sandbox start, tmux, episodes, grading, teardown).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--attempts", type=int, default=16)
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from horizon.eval.agent import AgentConfig
    from horizon.eval.attempt import LiveSandboxes, RunContext, run_attempt
    from horizon.eval.llm import ScriptedBackend
    from horizon.eval.prompts import Template
    from horizon.eval.rollout import run_repeat
    from horizon.eval.sandbox import toolchain
    from horizon.eval.tasks import load_harbor
    from horizon.terminus import Command, render_response

    task = load_harbor(REPO / "demo" / "tasks" / "word-count")
    ans = [
        render_response("a", "p", [Command("wc -w < poem.txt > words.txt\n", 0.1)], False, reasoning="r"),
        render_response("a", "p", [], True, reasoning="r"),
        render_response("a", "p", [], True, reasoning="r"),
    ]
    waits = 0.1
    template = Template.load(REPO / "demo" / "prompt.yaml")
    with toolchain.temporary() as tools:
        ctx = RunContext("local", ScriptedBackend(ans), template, AgentConfig(), [], {"toolchain": tools})
        recs = [run_attempt(task, i, 0, ctx, 0, LiveSandboxes(), None).record.to_dict() for i in range(8)]
        assert all(r["success"] for r in recs)
        over = [r["seconds"] - waits for r in recs]
        parts = {
            k: statistics.median(r["timing"][k] for r in recs)
            for k in ("start", "agent", "grade", "teardown")
        }
        print(
            f"rollout harness overhead per attempt (local sandbox, scripted model, 3 episodes): "
            f"median {statistics.median(over):.2f} s (goal <= 1 s); start {parts['start']:.3f} s, "
            f"episodes {parts['agent'] - waits:.3f} s (+{waits:.1f} s scripted waits), grade {parts['grade']:.3f} s, "
            f"teardown {parts['teardown']:.3f} s"
        )
        rates = {}
        for c in (1, 4):
            ctx = RunContext("local", ScriptedBackend(ans), template, AgentConfig(), [], {"toolchain": tools})
            with tempfile.TemporaryDirectory() as d:
                t = time.perf_counter()
                run_repeat([task], a.attempts, 0, ctx, Path(d) / "attempts.jsonl", seed=0, concurrency=c)
                rates[c] = a.attempts / (time.perf_counter() - t)
        print(
            f"rollout throughput on this machine: {rates[1]:.2f} attempts/s at concurrency 1, "
            f"{rates[4]:.2f} at 4 (x{rates[4] / rates[1]:.2f})"
        )


if __name__ == "__main__":
    main()
