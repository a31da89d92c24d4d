"""The local sandbox's cgroup without a kernel behind it (FAKE cgroup trees): where it goes, why it cannot be
made, and what its counters say when something inside failed."""

from pathlib import Path

import pytest

from horizon.eval.sandbox.local import limits as cgroups
from horizon.eval.sandbox.local.limits import Cgroup


def v2_cgroup(d: Path, pids: int, pids_max: int = 64, refused: int = 0, memory_mb: int = 10) -> Cgroup:
    files = {
        "pids.current": f"{pids}\n",
        "pids.max": f"{pids_max}\n",
        "pids.events": f"max {refused}\n",
        "memory.current": f"{memory_mb << 20}\n",
        "memory.max": f"{256 << 20}\n",
        "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
    }
    for name, text in files.items():
        (d / name).write_text(text)
    return Cgroup(2, {c: d for c in ("memory", "pids", "cpu")})


def test_a_full_process_table_is_at_its_limit(tmp_path):
    assert v2_cgroup(tmp_path, pids=63).full() == ["processes 63 of 64"]
    assert v2_cgroup(tmp_path, pids=5).full() == []


def test_forks_refused_while_checking_count_when_the_count_dips(tmp_path):
    before = v2_cgroup(tmp_path, pids=64, refused=100).counters()
    dipped = v2_cgroup(tmp_path, pids=20, refused=130)  # a fork bomb's processes died and respawn
    assert dipped.full(before=before) == ["processes: 30 forks refused at 64 while checking"]
    # refusals from earlier in the attempt say nothing about now
    assert v2_cgroup(tmp_path, pids=20, refused=130).full(before=dipped.counters()) == []
    assert dipped.full() == []


def test_memory_near_its_limit_is_full(tmp_path):
    assert v2_cgroup(tmp_path, pids=5, memory_mb=250).full() == ["memory 250 of 256 MB"]


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
