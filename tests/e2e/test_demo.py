"""`make demo`'s run, end to end on this CPU: the tables mean something."""

import csv
import json
import subprocess
import sys

import pytest
import yaml

from tests.helpers import REPO, compile_latex, snakemake, write_config

pytestmark = pytest.mark.slow


def demo_config(tmp_path):
    cfg = yaml.safe_load((REPO / "demo" / "config.yaml").read_text())
    cfg["eval"]["benchmarks"]["demo"]["path"] = str(REPO / "demo" / "tasks")
    cfg["eval"]["prompt_template"] = str(REPO / "demo" / "prompt.yaml")
    cfg["dmpo"]["tasks"]["path"] = str(REPO / "demo" / "train-tasks")
    return write_config(tmp_path / "config.yaml", cfg)


def test_the_demo_runs_end_to_end_and_shows_the_horizon_effect(tmp_path, local_engine):
    from tests.engine_fixtures import ensure_debian_package

    ensure_debian_package("pdflatex", "texlive-latex-base")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "horizon.demo",
            "--configfile",
            str(demo_config(tmp_path)),
            "--directory",
            str(tmp_path),
            "--cores",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=2400,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "results/tables/reliability.md" in proc.stdout and "| model | success attempts" in proc.stdout
    # the time by stage, read from every job's benchmark file: 18 rollout jobs, 8 training jobs (DMPO's
    # included), and DMPO's preference data (tasks, rollouts, pairs, reference)
    stages = {line.split()[0]: line.split() for line in proc.stdout.splitlines() if line.startswith("  ")}
    assert "Wall time" in proc.stdout and stages["rollout"][3] == "18" and stages["train"][3] == "8", stages
    assert stages["dmpo"][3] == "4", stages
    tables = tmp_path / "results" / "tables"
    for name in ("reliability", "cost", "behaviour", "budget", "tasks"):
        for ext in ("md", "csv", "tex"):
            assert (tables / f"{name}.{ext}").stat().st_size > 0
        # every LaTeX table compiles as a user pastes it into a paper
        latex = compile_latex((tables / f"{name}.tex").read_text(), tmp_path)
        assert latex.returncode == 0, f"{name}.tex: {latex.stdout[-2000:]}"
    assert (tables / "paired-single-K384-vs-refine-H640-top-50.md").exists()
    assert (tables / "paired-single-K640-vs-dmpo-single-K640.md").exists()
    pairs = json.loads((tmp_path / "results" / "dmpo" / "single-K640" / "pairs.json").read_text())
    assert pairs["pairs"] > 0 and pairs["tasks"] == 6
    for fig in (
        "passk-demo.png",
        "tasks-demo.png",
        "episodes.png",
        "local_loglik.png",
        "subset_difficulty.png",
    ):
        assert (tmp_path / "results" / "figures" / fig).stat().st_size > 10_000
    rows = {r["model"]: r for r in csv.DictReader(open(tables / "reliability.csv"))}
    succ = {m: float(r["success_attempts_mean"]) for m, r in rows.items()}
    # trained models solve bundled tasks the untrained student cannot
    assert succ["base"] == 0 and succ["single-K640"] >= 12
    # the horizon bites: a horizon that stops before any action learns nothing useful
    assert succ["single-K192"] < succ["single-K384"] < succ["single-K640"] + 1e-9
    assert all(
        m in rows
        for m in (
            "refine-H640-top-50",
            "refine-H640-bottom-50",
            "refine-H640-random-50",
            "refine-H640-all-100",
            "dmpo-single-K640",
        )
    )
    # the tables and figures go into Snakemake's HTML report with their captions
    snakemake(
        [
            "--configfile",
            str(tmp_path / "config.yaml"),
            "--directory",
            str(tmp_path),
            "--report",
            str(tmp_path / "report.html"),
        ],
        timeout=600,
    )
    html = (tmp_path / "report.html").read_text(errors="replace")
    assert "reliability.md" in html and "passk-demo.png" in html
