"""What a sandbox's cgroup counters say about its limits, read from a v2 directory laid out in tmp."""

from pathlib import Path

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
