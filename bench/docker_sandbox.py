#!/usr/bin/env python
"""Docker sandbox figures: base and task image build (cold, cached) and per-attempt overhead.

  python bench/docker_sandbox.py [--attempts 8]     # as root: starts its own dockerd (Debian's docker.io)

Per-attempt overhead = attempt wall time minus the scripted model's waits (container start with
the toolchain copied in, tmux, 3 episodes, grading inside the container, removal).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--attempts", type=int, default=8)
    a = ap.parse_args()
    from tests.engine_fixtures import start_dockerd, stop_dockerd

    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        proc, host = start_dockerd(root)
        os.environ["DOCKER_HOST"] = host
        try:
            from horizon.eval.agent import AgentConfig
            from horizon.eval.attempt import LiveSandboxes, RunContext, run_attempt
            from horizon.eval.llm import ScriptedBackend
            from horizon.eval.prompts import Template
            from horizon.eval.sandbox import SandboxSpec, toolchain
            from horizon.eval.sandbox.docker import build_base_image, client, ensure_image
            from horizon.eval.tasks import load_harbor
            from horizon.terminus import Command, render_response

            t = time.monotonic()
            build_base_image(workdir=root)
            base_s = time.monotonic() - t
            ctx_dir = root / "ctx"
            shutil.copytree(REPO / "demo/tasks/word-count/environment", ctx_dir)
            (ctx_dir / "files" / "nonce").write_text(uuid.uuid4().hex)  # a context never built before
            spec = SandboxSpec(name="b", dockerfile_dir=ctx_dir)
            c = client()
            t = time.monotonic()
            ensure_image(c, spec, "horizon-base:bookworm")
            cold = time.monotonic() - t
            t = time.monotonic()
            ensure_image(c, spec, "horizon-base:bookworm")
            cached = time.monotonic() - t
            print(
                f"docker base image (debootstrap + import): {base_s:.1f} s; task image build: {cold:.1f} s cold, "
                f"{cached:.3f} s cached"
            )
            task = load_harbor(REPO / "demo/tasks/word-count")
            ans = [
                render_response(
                    "a", "p", [Command("wc -w < poem.txt > words.txt\n", 0.1)], False, reasoning="r"
                ),
                render_response("a", "p", [], True, reasoning="r"),
                render_response("a", "p", [], True, reasoning="r"),
            ]
            with toolchain.temporary() as tools:
                ctx = RunContext(
                    "docker",
                    ScriptedBackend(ans),
                    Template.load(REPO / "demo/prompt.yaml"),
                    AgentConfig(),
                    [],
                    {"toolchain": tools},
                    "bench",
                )
                recs = [
                    run_attempt(task, i, 0, ctx, 0, LiveSandboxes(), None).record.to_dict()
                    for i in range(a.attempts)
                ]
            assert all(r["success"] for r in recs), [r["failure_mode"] for r in recs]
            over = statistics.median(r["seconds"] - 0.1 for r in recs)
            parts = {
                k: statistics.median(r["timing"][k] for r in recs)
                for k in ("start", "agent", "grade", "teardown")
            }
            print(
                f"docker per-attempt overhead (cached image, scripted model, 3 episodes): median {over:.2f} s "
                f"(goal <= 3 s); start {parts['start']:.2f} s, episodes {parts['agent'] - 0.1:.2f} s (+0.1 s waits), "
                f"grade {parts['grade']:.2f} s, teardown {parts['teardown']:.2f} s"
            )
        finally:
            stop_dockerd(proc)


if __name__ == "__main__":
    main()
