"""Crash safety: SIGKILL the whole run during tokenize, train, score and rollout; rerun with
--rerun-incomplete each time. The final tables equal an uninterrupted run's, the subsets are
byte-identical, and no attempt is missing or duplicated in any attempts.jsonl."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.engine_fixtures import sandbox_processes
from tests.helpers import BIN, DEMO_TASKS, REPO, snakemake, tiny_demo_config

pytestmark = pytest.mark.slow


def args(workdir: Path) -> list[str]:
    return ["--configfile", str(workdir / "config.yaml"), "--directory", str(workdir), "--cores", "2"]


def lines(p: Path) -> int:
    try:
        return p.read_text().count("\n")
    except OSError:
        return 0


KILL_POINTS = {
    "tokenize": lambda d: (d / "results/logs/tokenize/shard-000.log").exists(),
    "train": lambda d: any(lines(p) >= 3 for p in d.glob("results/checkpoints/*/train_log.jsonl")),
    "score": lambda d: any(d.glob("results/logs/score/*/shard-*.log")),
    "rollout": lambda d: any(lines(p) >= 2 for p in d.glob("results/rollouts/*/*/r*/attempts.partial.jsonl")),
}


def run_until(workdir: Path, point: str, timeout: float = 900) -> bool:
    """Run the workflow; SIGKILL everything when the kill point is reached. True if killed."""
    proc = subprocess.Popen(
        [str(BIN / "snakemake"), "-s", str(REPO / "Snakefile"), "--rerun-incomplete", *args(workdir)],
        cwd=workdir,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + timeout
    while proc.poll() is None and time.time() < deadline:
        if KILL_POINTS[point](workdir):
            os.killpg(proc.pid, signal.SIGKILL)  # the job processes are in snakemake's process group
            proc.wait()
            time.sleep(1)
            assert sandbox_processes() == [], f"sandboxes left running after the kill during {point}"
            snakemake([*args(workdir), "--unlock"], cwd=workdir)
            return True
        time.sleep(0.05)
    proc.wait()
    return False


def outputs(workdir: Path) -> dict[str, bytes]:
    res = workdir / "results"
    files = {}
    for p in sorted((res / "tables").glob("*")):
        if not p.name.startswith("cost."):  # training hours differ between runs by nature
            files[f"tables/{p.name}"] = p.read_bytes()
    for p in sorted((res / "subsets").rglob("*.parquet")):
        files[str(p.relative_to(res))] = p.read_bytes()
    files["scores"] = (res / "scores/H384-640/scores.parquet").read_bytes()
    return files


def test_killed_runs_resume_to_the_same_tables(tmp_path, local_engine):
    ref, crash = tmp_path / "ref", tmp_path / "crash"
    ref.mkdir()
    crash.mkdir()
    tiny_demo_config(ref)
    tiny_demo_config(crash)
    snakemake(args(ref), cwd=ref, timeout=1800)
    killed = [p for p in KILL_POINTS if run_until(crash, p)]
    assert killed == list(KILL_POINTS), f"only killed during {killed}"
    snakemake(["--rerun-incomplete", *args(crash)], cwd=crash, timeout=1800)
    a, b = outputs(ref), outputs(crash)
    assert sorted(a) == sorted(b)
    different = [k for k in a if a[k] != b[k]]
    assert different == [], f"outputs differ after the crashes: {different}"
    for att in crash.glob("results/rollouts/*/*/r*/attempts.jsonl"):
        recs = [json.loads(x) for x in att.read_text().splitlines()]
        keys = [(r["task"], r["attempt"]) for r in recs]
        assert len(keys) == len(set(keys)) == len(DEMO_TASKS) * 2, att
    assert not list(crash.glob("results/rollouts/*/*/r*/attempts.partial.jsonl"))
