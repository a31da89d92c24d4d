"""The local (bubblewrap) sandbox against the real engine: isolation, limits, teardown."""

import os
import time
from pathlib import Path

import pytest

from horizon.eval.sandbox import SandboxError, SandboxSpec
from horizon.eval.sandbox.local import LocalSandbox
from tests.engine_fixtures import sandbox_processes

pytestmark = pytest.mark.engine


@pytest.fixture
def sb(local_engine, tools, tmp_path):
    files = tmp_path / "files"
    files.mkdir()
    (files / "in.txt").write_text("input\n")
    s = LocalSandbox(
        SandboxSpec(name="t", workdir_files=files, max_processes=64, memory_mb=512), toolchain=tools
    )
    s.start()
    yield s
    s.stop()


def test_app_holds_the_task_files_and_is_writable(sb):
    r = sb.exec("cat in.txt && echo out > out.txt && cat out.txt && pwd && id -u")
    assert r.ok and r.stdout == "input\nout\n/app\n0\n"


def test_host_is_read_only_and_hidden(sb, tmp_path):
    canary = Path("/tmp") / f"horizon-canary-{os.getpid()}"
    canary.write_text("untouched")
    try:
        r = sb.exec(
            f"echo pwned > /etc/horizon-canary; echo pwned > {canary}; echo x > /usr/bin/x; "
            f"ls {Path(__file__).resolve().parents[2]} 2>&1; ls /home /work 2>&1; true"
        )
        assert "Read-only file system" in r.stderr
        assert "No such file or directory" in r.stdout  # the repository and /home are not there
        assert canary.read_text() == "untouched" and not Path("/etc/horizon-canary").exists()
    finally:
        canary.unlink()


def test_no_network_own_pid_namespace_no_capabilities(sb):
    r = sb.exec(["python3", "-c", "import socket; socket.create_connection(('1.1.1.1', 53), timeout=2)"])
    assert r.rc != 0 and ("unreachable" in r.stderr or "Errno" in r.stderr)
    ps = sb.exec("ls /proc | grep -c '^[0-9]'")
    assert int(ps.stdout) < 10  # only the sandbox's own processes
    assert sb.exec("grep CapEff /proc/self/status").stdout.split()[1] == "0000000000000000"


def test_exec_timeout_kills_the_command(sb):
    t = time.monotonic()
    r = sb.exec("sleep 100", timeout=0.5)
    assert r.timed_out and time.monotonic() - t < 5


def test_output_is_capped_not_buffered_unbounded(sb):
    r = sb.exec("yes | head -c 50000000", max_bytes=4096, timeout=60)
    assert len(r.stdout) < 10000 and "bytes omitted" in r.stdout


def test_memory_is_limited(sb):
    big = sb.exec(["python3", "-c", "x = bytearray(2 * 1024**3)"], timeout=20)
    assert big.rc != 0 and "MemoryError" in big.stderr
    assert sb.exec("echo still alive").stdout == "still alive\n"


def test_fork_bomb_is_contained_and_torn_down(local_engine, tools):
    import subprocess

    s = LocalSandbox(SandboxSpec(name="bomb", max_processes=64), toolchain=tools)
    s.start()
    try:
        s.exec("bash -c ':(){ :|:& };:' ; sleep 1", timeout=5)
        # the host can still start processes: the sandbox's uid hit its own limit only
        assert subprocess.run(["true"]).returncode == 0
        from horizon.eval.sandbox.local import _user_processes

        if os.geteuid() == 0:  # each sandbox has its own uid: the bomb is capped at max_processes
            assert 10 < _user_processes(s.uid) <= 64
    finally:
        s.stop()
    time.sleep(0.2)
    assert sandbox_processes() == []


def test_put_and_get(sb, tmp_path):
    d = tmp_path / "tests"
    d.mkdir()
    (d / "t.txt").write_text("x")
    sb.put(d, "/tests")
    assert sb.exec("cat /tests/t.txt").stdout == "x"
    assert sb.get("/tests/t.txt", tmp_path / "back.txt") and (tmp_path / "back.txt").read_text() == "x"
    assert not sb.get("/nope", tmp_path / "nope.txt")


def test_stop_leaves_nothing_running(local_engine, tools):
    s = LocalSandbox(SandboxSpec(name="stop"), toolchain=tools)
    s.start()
    s.exec("nohup sleep 1000 >/dev/null 2>&1 & tmux new-session -d -s x sleep 1000", timeout=10)
    assert sandbox_processes()
    s.stop()
    time.sleep(0.2)
    assert sandbox_processes() == []
    with pytest.raises(SandboxError, match="not running"):
        s.exec("true")


def test_the_grader_toolchain_needs_nothing_from_the_host(sb):
    from horizon.eval.sandbox.toolchain import GRADER_ENV

    r = sb.exec(
        [
            "python3",
            "-S",
            "-c",
            "import pytest, pluggy, pygments, iniconfig; print(pytest.__file__, pygments.__file__)",
        ],
        env=GRADER_ENV,
    )
    assert r.ok, r.stderr
    assert r.stdout.split() == [
        "/opt/horizon/lib/pytest/__init__.py",
        "/opt/horizon/lib/pygments/__init__.py",
    ]
    assert sb.exec("command -v pytest uv", env=GRADER_ENV).stdout.split() == [
        "/opt/horizon/bin/pytest",
        "/opt/horizon/bin/uv",
    ]
    assert sb.exec("command -v uv || echo absent").stdout.strip() == "absent"  # not on the agent's PATH
