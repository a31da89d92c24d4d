"""A rollout job killed with SIGTERM mid-attempt leaves no sandbox; the rerun runs only what is missing."""

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.engine_fixtures import sandbox_processes, sandboxes_left
from tests.helpers import FIXTURES, REPO, wait_for

pytestmark = pytest.mark.engine

JOB = r"""
import logging, sys
from horizon.eval.agent.loop import AgentConfig
from tests.doubles.backends import ScriptedBackend
from horizon.eval.agent.prompts import Template
from horizon.eval.attempt import RunContext
from horizon.eval.rollout import run_repeat
from horizon.eval.tasks.benchmark import load_harbor
from horizon.terminus import Command, render_response
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
ans = lambda cmds, done=False, d=0.1: render_response("a", "p", [Command(c, d) for c in cmds], done, reasoning="r")
script = [ans(["sleep 2\n"], d=2), ans(["echo hello > /app/out.txt\n"]), ans([], True), ans([], True)]
backend = ScriptedBackend(lambda msgs: script[sum(m["role"] == "assistant" for m in msgs)])
ctx = RunContext("local", backend, Template.load(sys.argv[3]), AgentConfig(), [], {"toolchain": sys.argv[4]})
run_repeat([load_harbor(sys.argv[1])], 6, 0, ctx, sys.argv[2], seed=0, concurrency=2)
"""


def sandboxed(cmdline: str) -> list[str]:
    """Pids of processes with this exact /proc cmdline (NUL-separated) in another pid namespace than ours."""
    found, ours = [], os.readlink("/proc/self/ns/pid")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if open(f"/proc/{pid}/cmdline").read() == cmdline and os.readlink(f"/proc/{pid}/ns/pid") != ours:
                found.append(pid)
        except OSError:
            continue
    return found


def test_sigterm_mid_attempt_then_resume(tools, tmp_path):
    out = tmp_path / "attempts.jsonl"
    partial = tmp_path / "attempts.partial.jsonl"
    args = [
        sys.executable,
        "-c",
        JOB,
        str(FIXTURES / "harbor-tasks" / "hello"),
        str(out),
        str(REPO / "demo" / "prompt.yaml"),
        str(tools),
    ]
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: partial.exists() and partial.read_text().count("\n") >= 2, "two attempts recorded")

    def mid_attempt():  # the next attempts' agents running their first command (sleep 2) in the job's sandboxes
        return sandboxed("sleep\x002\x00") and sandbox_processes({proc.pid})

    wait_for(mid_attempt, "an agent's `sleep 2` running in a sandbox of the job")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "tearing down" in err
    assert sandboxes_left(harnesses={proc.pid}) == []
    done = partial.read_text().count("\n")
    assert 2 <= done < 6 and not out.exists()
    again = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    _, err = again.communicate(timeout=120)
    assert again.returncode == 0, err[-2000:]
    assert f"resuming: {done} attempts recorded, {6 - done} to run" in err
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(r["attempt"] for r in recs) == list(range(6))  # each once: none lost, none twice
    assert all(r["success"] for r in recs) and not partial.exists()
    assert sandboxes_left(harnesses={again.pid}) == []
    os.sync()
