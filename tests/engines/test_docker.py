"""The docker sandbox against a real daemon started by the tests: both task formats graded inside the
container, passing and failing, image cache, labels, and SIGTERM leaving no container of ours."""

import json
import signal
import subprocess
import sys
import time

import pytest

from horizon.eval.agent import AgentConfig
from horizon.eval.attempt import LiveSandboxes, RunContext, run_attempt
from horizon.eval.llm import ScriptedBackend
from horizon.eval.prompts import Template
from horizon.eval.sandbox import SandboxSpec
from horizon.eval.sandbox.docker import DockerSandbox, client, ensure_image
from horizon.eval.tasks import load_harbor, load_tb1
from horizon.terminus import Command, render_response
from tests.helpers import FIXTURES, REPO

pytestmark = [pytest.mark.engine, pytest.mark.slow]
TEMPLATE = Template.load(REPO / "demo" / "prompt.yaml")


def ans(cmd=None, done=False, d=0.2):
    return render_response("a", "p", [Command(cmd, d)] if cmd else [], done, reasoning="r")


SOLVE = [ans("echo hello > /app/out.txt\n"), ans(done=True), ans(done=True)]
WRONG = [ans("echo nope > /app/out.txt\n"), ans(done=True), ans(done=True)]


def ours(host):
    out = subprocess.run(
        ["docker", "-H", host, "ps", "-aq", "--filter", "label=horizon.sandbox=1"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return out


def attempt(tools, answers, task):
    ctx = RunContext(
        "docker", ScriptedBackend(answers), TEMPLATE, AgentConfig(), [], {"toolchain": tools}, "t"
    )
    out = run_attempt(task, 0, 0, ctx, 0, LiveSandboxes(), None)
    return {**out.record.to_dict(), "messages": out.messages}


@pytest.mark.parametrize("fmt", ["harbor", "tb1"])
def test_both_formats_pass_and_fail_inside_containers(dockerd, tools, fmt):
    task = (
        load_harbor(FIXTURES / "harbor-tasks/hello")
        if fmt == "harbor"
        else load_tb1(FIXTURES / "tb1-tasks/hello-tb1")
    )
    good = attempt(tools, SOLVE, task)
    assert good["success"] and good["ended"] == "completed", good
    assert "root@box:/app#" in good["messages"][2]["content"]
    bad = attempt(tools, WRONG, task)
    assert not bad["success"] and bad["failure_mode"] == "tests_failed"
    assert ours(dockerd) == []


def test_image_cache_labels_limits_and_no_network(dockerd, tools):
    task = load_harbor(FIXTURES / "harbor-tasks/hello")
    spec = SandboxSpec(
        name="x",
        dockerfile_dir=__import__("pathlib").Path(task.build_context),
        memory_mb=512,
        labels={"horizon.run": "r1", "horizon.task": "hello", "horizon.attempt": "3"},
    )
    c = client()
    t0 = time.monotonic()
    tag = ensure_image(c, spec, "horizon-base:bookworm")
    t1 = time.monotonic()
    assert (
        ensure_image(c, spec, "horizon-base:bookworm") == tag and time.monotonic() - t1 < 2
    )  # cached by content
    print(f"\ntask image build {t1 - t0:.1f} s cold, {time.monotonic() - t1:.2f} s cached")
    sb = DockerSandbox(spec, toolchain=tools)
    sb.start()
    try:
        attrs = c.containers.get(sb.container.id).attrs
        assert (
            attrs["Config"]["Labels"]["horizon.attempt"] == "3"
            and attrs["HostConfig"]["NetworkMode"] == "none"
        )
        assert attrs["HostConfig"]["Memory"] == 512 * 2**20
        r = sb.exec(["python3", "-c", "import socket; socket.create_connection(('1.1.1.1', 53), timeout=2)"])
        assert r.rc != 0
        assert sb.exec("cat /app/in.txt").stdout == "input\n"
        assert sb.exec("sleep 30", timeout=1).timed_out
    finally:
        sb.stop()
    assert ours(dockerd) == []


JOB = r"""
import sys
from horizon.eval.agent import AgentConfig
from horizon.eval.llm import ScriptedBackend
from horizon.eval.prompts import Template
from horizon.eval.attempt import RunContext
from horizon.eval.rollout import run_repeat
from horizon.eval.tasks import load_harbor
from horizon.terminus import Command, render_response
ans = lambda c, done=False, d=0.2: render_response("a", "p", [Command(c, d)] if c else [], done, reasoning="r")
script = [ans("sleep 30\n", d=30), ans("echo hello > /app/out.txt\n"), ans(None, True), ans(None, True)]
b = ScriptedBackend(lambda m: script[sum(x["role"] == "assistant" for x in m)])
ctx = RunContext("docker", b, Template.load(sys.argv[3]), AgentConfig(), [], {"toolchain": sys.argv[4]}, "sigterm")
run_repeat([load_harbor(sys.argv[1])], 4, 0, ctx, sys.argv[2], seed=0, concurrency=2)
"""


def test_sigterm_mid_attempt_leaves_no_container(dockerd, tools, tmp_path):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            JOB,
            str(FIXTURES / "harbor-tasks/hello"),
            str(tmp_path / "attempts.jsonl"),
            str(REPO / "demo/prompt.yaml"),
            str(tools),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    while time.time() < deadline and len(ours(dockerd)) < 2:
        time.sleep(0.2)
    assert len(ours(dockerd)) == 2, "expected two containers mid-attempt"
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    assert ours(dockerd) == []
    assert not (tmp_path / "attempts.jsonl").exists()


def test_sweep_removes_stale_containers_of_the_same_run(dockerd, tools):
    from horizon.eval.sandbox.docker import sweep

    spec = SandboxSpec(
        name="stale",
        dockerfile_dir=__import__("pathlib").Path(FIXTURES / "harbor-tasks/hello/environment"),
        labels={"horizon.run": "m/b/r0"},
    )
    sb = DockerSandbox(spec, toolchain=tools)
    sb.start()
    sb.container = None  # as if the job had been SIGKILLed: nobody removes it
    assert len(ours(dockerd)) == 1
    assert sweep("other/b/r0") == 0 and sweep("m/b/r0") == 1
    assert ours(dockerd) == []
    json.dumps({})
