"""Grading and failure attribution without a sandbox: strict rewards, failure modes by evidence,
where a sandbox's cgroup goes, and errors that name what failed."""

import pytest

from horizon.eval.agent.loop import AgentResult
from horizon.eval.attempt import failure_mode
from horizon.eval.grading.grader import Grade, parse_reward
from horizon.eval.sandbox import Diagnosis, SandboxError
from horizon.eval.sandbox.local import limits as cgroups


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


def fake_cgroupfs(tmp_path, subtree: dict[str, str], own: str):
    """FAKE: a cgroup v2 tree as directories and files (no kernel behind it), and the process's place in it."""
    root = tmp_path / "cg"
    for rel, controllers in subtree.items():
        d = root / rel
        d.mkdir(parents=True, exist_ok=True)
        (d / "cgroup.subtree_control").write_text(controllers)
    (tmp_path / "mountinfo").write_text(f"30 23 0:26 / {root} rw,nosuid - cgroup2 cgroup2 rw\n")
    (tmp_path / "cgroup").write_text(f"0::{own}\n")
    return root, str(tmp_path / "mountinfo"), str(tmp_path / "cgroup")


def test_v2_cgroups_go_under_the_nearest_ancestor_that_delegates_the_controllers(tmp_path):
    root, mi, pc = fake_cgroupfs(
        tmp_path, {"": "cpu memory pids", "job": "cpu memory pids", "job/step": "memory", "job/step/task": ""},
        "/job/step/task",
    )  # fmt: skip
    cg = cgroups.Cgroup.create("t", 256, 64, 0.5, mountinfo=mi, proc_cgroup=pc)
    d = cg.dirs["memory"]
    assert cg.version == 2 and d.parent == root / "job" and set(cg.dirs.values()) == {d}
    assert (d / "memory.max").read_text() == str(256 << 20) and (d / "pids.max").read_text() == "64"
    assert (d / "cpu.max").read_text() == "50000 100000" and cg.procs_files == [str(d / "cgroup.procs")]
    cg.remove(timeout=0)  # a FAKE directory with files in it: not removable like a real cgroup
    assert d.exists()


def test_without_any_delegation_the_error_says_why(tmp_path):
    root, mi, pc = fake_cgroupfs(tmp_path, {"": "", "a": "memory"}, "/a")
    # a FAKE root takes the write but, unlike the kernel's, enables nothing
    with pytest.raises(
        cgroups.CgroupsUnavailable, match="enabling memory, pids, cpu in its root did not take"
    ):
        cgroups.Cgroup.create("t", 256, 64, 1.0, mountinfo=mi, proc_cgroup=pc)
    (root / "cgroup.subtree_control").unlink()  # a root this user cannot write: nothing to try
    with pytest.raises(
        cgroups.CgroupsUnavailable, match="no cgroup at or above /a delegates memory, pids, cpu"
    ):
        cgroups.Cgroup.create("t", 256, 64, 1.0, mountinfo=mi, proc_cgroup=pc)


def test_an_unreachable_docker_daemon_is_named(monkeypatch):
    pytest.importorskip("docker")
    from horizon.eval.sandbox.docker.sandbox import client

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/horizon-docker.sock")
    with pytest.raises(
        SandboxError, match="cannot reach the Docker daemon at unix:///nonexistent/horizon-docker.sock"
    ):
        client()


def test_a_garbled_silent_or_closed_init_channel_is_a_sandbox_error():
    import socket
    import time

    from horizon.eval.sandbox.local.hostexec import InitChannel

    ours, fake_init = socket.socketpair(
        socket.AF_UNIX, socket.SOCK_SEQPACKET
    )  # FAKE: a test stands for pid 1
    chan = InitChannel(ours, "t")
    fake_init.send(b"x" * 100_000)  # too large and not JSON: cut at 4 KiB, refused
    with pytest.raises(SandboxError, match="t: a malformed message from the sandbox's init"):
        chan.recv("pid", time.monotonic() + 5)
    fake_init.send(b'{"exit": 7, "status": 0}')  # a late exit of another command is skipped, not taken
    fake_init.send(b'{"pid": 9}')
    assert chan.recv("pid", time.monotonic() + 5) == {"pid": 9}
    with pytest.raises(SandboxError, match="did not answer in time"):
        chan.recv("exit", time.monotonic() + 0.2, 9)
    fake_init.close()
    with pytest.raises(SandboxError, match="t: the sandbox's init is gone"):
        chan.recv("exit", time.monotonic() + 5, 9)
