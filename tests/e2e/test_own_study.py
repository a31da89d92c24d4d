"""A user's own study from nothing, as docs/your-own-study.md tells it: a corpus collected on three own
Harbor tasks, `horizon init`, `horizon check-corpus`, then the run it prints, to the main table."""

import csv
import shutil
import subprocess
import sys
import time

import pytest

from tests.helpers import REPO, snakemake

pytestmark = pytest.mark.slow(minutes=4)

OWN_TASKS = ["count-rows", "run-script", "fix-bug"]


def horizon(*args, cwd):
    proc = subprocess.run(
        [sys.executable, "-m", "horizon.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_init_then_the_printed_run_reaches_the_main_table(tmp_path, local_engine):
    tasks = tmp_path / "mytasks"
    for t in OWN_TASKS:  # three of the bundled tasks, as a user's own Harbor task set
        shutil.copytree(REPO / "demo/tasks" / t, tasks / t)
    started = time.monotonic()
    horizon("collect", "--tasks", "mytasks", "--template", str(REPO / "demo/prompt.yaml"),
            "--out", "mydata/corpus.jsonl", "--variants", "4", cwd=tmp_path)  # fmt: skip
    said = horizon(
        "init", "studies/mine", "--corpus", "mydata/corpus.jsonl", "--tasks", "mytasks", cwd=tmp_path
    )
    study = tmp_path / "studies/mine"
    assert "horizons: [" in said and "refine.h1: " in said and (study / "config.yaml").exists()
    check = horizon(
        "check-corpus",
        "--configfile",
        "studies/mine/config.yaml",
        "--directory",
        "studies/mine",
        cwd=tmp_path,
    )
    assert "12 completed" in check and "nothing impossible or degenerate" in check
    # the command init printed, run from another directory
    run = next(line for line in said.splitlines() if line.startswith("run: snakemake ")).split()[2:]
    assert run[:2] == ["-s", str(REPO / "Snakefile")]
    snakemake([*run[2:], "results/tables/reliability.md"], cwd=tmp_path, timeout=1500)
    took = time.monotonic() - started
    rows = list(csv.DictReader(open(study / "results/tables/reliability.csv")))
    # three single-stage models, top/bottom/random at rho 0.5 and the whole pool
    assert len({r["model"] for r in rows}) == 7, rows
    assert (study / "results/tables/reliability.md").read_text().count("| single-stage K=") == 3
    print(f"from nothing to the main table: {took:.0f} s")
