"""The podman sandbox against real Podman services started here: rootful (the `podman` fixture, in the
docker group: the base image's debootstrap archive is shared) and rootless (a service run as `nobody`).

The hostile-agent probes run under podman in test_hostile.py; here what Podman does otherwise than
Docker: the limits it applies (and, rootless on cgroups v1, the ones it cannot), the storage watch over
its layer sizes, its events telling a kill through the engine from an end inside, and no container,
conmon or mount of ours left behind.
"""

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from horizon.eval.agent.loop import AgentConfig
from horizon.eval.agent.prompts import Template
from horizon.eval.attempt import LiveSandboxes, RunContext, run_attempt
from horizon.eval.sandbox import SandboxError, SandboxSpec
from horizon.eval.sandbox.docker.sandbox import client
from horizon.eval.sandbox.podman import service
from horizon.eval.sandbox.podman.sandbox import PodmanSandbox
from horizon.eval.tasks.benchmark import load_harbor
from horizon.terminus import Command, render_response
from tests.doubles.backends import ScriptedBackend
from tests.engine_fixtures import engine_processes, ensure_debian_package, ensure_root
from tests.helpers import FIXTURES, REPO

pytestmark = [pytest.mark.engine, pytest.mark.slow(minutes=2)]
TEMPLATE = Template.load(REPO / "demo" / "prompt.yaml")
HELLO = FIXTURES / "harbor-tasks" / "hello"


def ans(cmd=None, done=False, d=0.2):
    return render_response("a", "p", [Command(cmd, d)] if cmd else [], done, reasoning="r")


SOLVE = [ans("echo hello > /app/out.txt\n"), ans(done=True), ans(done=True)]


def attempt(tools, answers, task, options=None):
    ctx = RunContext(
        "podman",
        ScriptedBackend(answers),
        TEMPLATE,
        AgentConfig(),
        [],
        {"toolchain": tools, **(options or {})},
        "t",
    )
    out = run_attempt(task, 0, 0, ctx, 0, LiveSandboxes(), None)
    return out.record.to_dict()


def ours(url):
    return client(url).containers.list(all=True, filters={"label": "horizon.sandbox=1"})


def spec(**kw):
    return SandboxSpec(name="p", dockerfile_dir=HELLO / "environment", labels={"horizon.run": "p"}, **kw)


CGROUP = "cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max 2>/dev/null || " \
         "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max"  # fmt: skip


def test_limits_hold_and_the_network_is_none(podman, tools):
    sb = PodmanSandbox(spec(memory_mb=300, max_processes=64), toolchain=tools)
    with sb:
        host = sb.container.attrs["HostConfig"]
        assert host["Memory"] == 300 << 20 and host["PidsLimit"] == 64 and host["NetworkMode"] == "none"
        memory, pids = sb.exec(["sh", "-c", CGROUP]).stdout.split()
        assert (int(memory), int(pids)) == (300 << 20, 64)  # the container's own cgroup says so
        assert sb.exec(["ls", "/sys/class/net"]).stdout.split() == ["lo"]
        # rootful Podman's own default (1048576) is more than this host lets root have: the harness's own
        assert sb.exec(["sh", "-c", "ulimit -n"]).stdout.strip() == str(service.rlimits()["nofile"])
    assert ours(podman) == []


def test_a_kill_through_the_engine_is_infra_and_an_end_inside_is_the_agents(podman, tools, tmp_path):
    from horizon.eval.rollout import run_repeat

    def model(messages):  # FAKE model: on its second call, someone outside kills the container
        n = sum(m["role"] == "assistant" for m in messages)
        if n == 1:
            [ct] = client(podman).containers.list(filters={"label": "horizon.run=killed"})
            ct.kill()
        return SOLVE[min(n, 2)]

    ctx = RunContext(
        "podman", ScriptedBackend(model), TEMPLATE, AgentConfig(), [], {"toolchain": tools}, "killed"
    )
    [rec] = run_repeat([load_harbor(HELLO)], 1, 0, ctx, tmp_path / "a.jsonl", seed=0, max_infra_retries=0)
    assert rec.failure_mode == "infra_error" and "killed through the Docker daemon (signal" in rec.evidence
    assert attempt(tools, SOLVE, load_harbor(HELLO))["success"]
    assert ours(podman) == []


def test_a_disk_filling_agent_is_stopped(podman, tools, tmp_path):
    """Stopped within the docker sandbox's bound (2x storage_mb), read from Podman's own layer sizes."""
    import threading

    from tests.engines.test_docker import LIMIT_MB, stopped_in_time

    d = tmp_path / "fill"
    shutil.copytree(HELLO, d)
    (d / "task.toml").write_text(
        (d / "task.toml").read_text().replace("[environment]", f"[environment]\nstorage_mb = {LIMIT_MB}")
    )
    api, seen, stop = client(podman).api, {"layer": 0}, threading.Event()

    def watch():  # the container's writable layer, every 50 ms
        while not stop.is_set():
            for ct in api.containers(all=True, size=True, filters={"label": "horizon.run=t"}):
                seen["layer"] = max(seen["layer"], ct.get("SizeRw") or 0)
            time.sleep(0.05)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        answers = [ans("dd if=/dev/zero of=/tmp/fill bs=1M\n", d=2)] + [ans(":\n", d=0.5)] * 60
        rec = attempt(tools, answers, load_harbor(d))
    finally:
        stop.set()
        t.join()
    print(f"\nthe layer reached {seen['layer'] / 2**20:.0f} MB (storage_mb {LIMIT_MB})")
    assert rec["failure_mode"] == "sandbox_exhausted" and f"storage_mb ({LIMIT_MB} MB)" in rec["evidence"], (
        rec
    )
    assert seen["layer"] > LIMIT_MB * 2**20 and stopped_in_time(seen["layer"])  # it wrote; stopped soon after
    assert ours(podman) == []


@pytest.fixture(scope="module")
def rootless(tools, base_rootfs):
    """A rootless Podman service run as `nobody` (setpriv execs it: its pid is podman's) with one uid
    mapped (no subuid range here: ignore_chown_errors), storage in a scratch directory it owns."""
    ensure_root("starting a service as nobody")
    ensure_debian_package("podman", "podman")
    ensure_debian_package("setpriv", "util-linux")
    from horizon.eval.sandbox.docker.baseimage import build_base_image
    from horizon.eval.sandbox.podman import service

    scratch = Path(tempfile.mkdtemp(prefix="horizon-rootless-"))
    (scratch / "run").mkdir(mode=0o700)
    (scratch / "storage.conf").write_text(
        f'[storage]\ndriver = "overlay"\ngraphroot = "{scratch}/storage"\nrunroot = "{scratch}/run/storage"\n'
        '[storage.options]\nignore_chown_errors = "true"\n'
    )
    shutil.chown(scratch, "nobody")
    for p in scratch.iterdir():
        shutil.chown(p, "nobody")
    env = {"HOME": str(scratch), "XDG_RUNTIME_DIR": str(scratch / "run"),
           "CONTAINERS_STORAGE_CONF": str(scratch / "storage.conf")}  # fmt: skip
    prefix = ("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups")
    proc, url = service.start(scratch / "podman.sock", log=scratch / "service.log", prefix=prefix, env=env)
    try:
        build_base_image(c=client(url), rootfs=base_rootfs)
        yield url
    finally:
        service.stop(proc)
        deadline = time.monotonic() + 30  # exec sessions' conmon, the user namespace's pause process
        while (left := engine_processes(str(scratch))) and time.monotonic() < deadline:
            time.sleep(0.5)
        pause = scratch / "run" / "libpod" / "tmp" / "pause.pid"
        for pid in left + ([int(pause.read_text())] if pause.exists() else []):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        subprocess.run(["rm", "-rf", str(scratch)], capture_output=True)


def test_rootless_without_delegated_cgroups_is_refused_unless_best_effort(rootless, tools):
    holds, why = service.limits_hold(client(rootless))
    task = load_harbor(HELLO)
    if holds:  # a machine with cgroups v2 delegated to the user: the limits are the cgroup's
        assert attempt(tools, SOLVE, task, {"podman_socket": rootless})["success"]
        return
    assert "rootless on cgroups" in why
    with pytest.raises(SandboxError, match="podman_limits: best-effort"):
        PodmanSandbox(spec(), toolchain=tools, podman_socket=rootless).start()
    rec = attempt(tools, SOLVE, task, {"podman_socket": rootless, "podman_limits": "best-effort"})
    assert rec["success"], rec
    assert ours(rootless) == []
