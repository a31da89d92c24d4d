"""`make demo`'s run, end to end on this CPU: the tables mean something."""

import csv
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
import yaml

from tests.helpers import REPO, compile_latex, snakemake, write_config

pytestmark = pytest.mark.slow(minutes=14)


# success attempts (of 24, mean of 2 repeats) K=640 must beat K=384 by: `python bench/demo_effect.py
# --seeds 11 13 17` gave K640 - K384 = +3.5, +5.0, +9.0 with the two-layer student and the demo's seed 7
# +6.0 (2026-12-02, docs/demo-results.md; the four-layer student gave +1.0, +4.5, +9.5 and +3.5); trained in
# fp32 (train.bf16: auto on a CPU without AMX) +6.5, +4.0, +5.5 and seed 7 +9.0 (2026-12-03); the margin is
# the smallest difference over the seeds
K640_MARGIN = 3.5


def confirmation_within_k(horizons) -> dict[int, float]:
    """Per K: the share of trajectories whose last decision step (the confirmation) starts within K."""
    import pyarrow.parquet as pq

    share = {}
    for k in (192, 384, 640):
        t = pq.read_table(horizons / f"K{k}.parquet").to_pydict()
        done = [d == n for d, n in zip(t["decision_steps"], t["total_decision_steps"], strict=True)]
        share[k] = sum(done) / len(done)
    return share


def demo_config(tmp_path):
    cfg = yaml.safe_load((REPO / "demo" / "config.yaml").read_text())
    cfg["eval"]["benchmarks"]["demo"]["path"] = str(REPO / "demo" / "tasks")
    cfg["eval"]["prompt_template"] = str(REPO / "demo" / "prompt.yaml")
    cfg["dmpo"]["tasks"]["path"] = str(REPO / "demo" / "train-tasks")
    return write_config(tmp_path / "config.yaml", cfg)


def assert_dmpo_row(res):
    """DMPO from the best single-stage model: its preference data (4 attempts on each of the 6 training
    tasks of demo/train-tasks, kept apart from the 12 evaluated), its training log and cost, and its row
    in every table. (These checks ran on a reduced demo of their own until 2026-12-02: the demo's run
    shows the same things, and the suite spent some 290 s on that second workflow.)"""
    pairs = json.loads((res / "dmpo" / "single-K640" / "pairs.json").read_text())
    assert pairs["policy"] == "single-K640" and pairs["tasks"] == 6 and pairs["attempts"] == 4 * 6, pairs
    assert pairs["pairs"] == pq.read_table(res / "dmpo/single-K640/pairs.parquet").num_rows
    assert pairs["pairs"] == sum(r["pairs"] for r in pairs["per_task"]) > 0
    model = res / "models" / "dmpo-single-K640"
    log = [json.loads(x) for x in (model / "train_log.jsonl").read_text().splitlines()]
    assert log and all(
        {"reward_margin", "reward_accuracy", "reward_chosen", "reward_rejected"} <= set(r) for r in log
    )
    timing = json.loads((model / "timing.json").read_text())
    assert timing["policy"] == "single-K640" and timing["preference_hours"] > 0
    tables = res / "tables"
    for name in ("reliability", "behaviour", "main"):
        assert "DMPO from single-stage K=640" in (tables / f"{name}.md").read_text(), name
    assert "dmpo-single-K640" in (tables / "tasks.md").read_text()  # a column per model name
    cost = {r["model"]: r for r in csv.DictReader(open(tables / "cost.csv"))}
    assert float(cost["dmpo-single-K640"]["total_hours"]) > float(cost["single-K640"]["total_hours"])
    rel = {r["model"]: r for r in csv.DictReader(open(tables / "reliability.csv"))}
    assert int(rel["dmpo-single-K640"]["n_tasks"]) == 12
    paired = (tables / "paired-single-K640-vs-dmpo-single-K640.md").read_text()
    assert "DMPO from single-stage K=640" in paired


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
    # the time by stage, read from every job's benchmark file: 10 models x 2 repeats, 10 training jobs
    # (3 single-stage, 5 refinements, the blind teacher's student, DMPO), DMPO's preference data (tasks,
    # two rollout jobs, pairs, reference)
    stages = {line.split()[0]: line.split() for line in proc.stdout.splitlines() if line.startswith("  ")}
    assert "Wall time" in proc.stdout and stages["rollout"][3] == "20" and stages["train"][3] == "10", stages
    assert stages["dmpo"][3] == "5", stages  # tasks, two preference rollout jobs, pairs, reference
    tables = tmp_path / "results" / "tables"
    pair = "single-K384-vs-refine-H640-top-50"
    for name in ("reliability", "cost", "behaviour", "budget", "tasks", "main", "benchmarks", "episodes",
                 f"cancellation-{pair}", "corpus", "teachers"):  # fmt: skip
        for ext in ("md", "csv", "tex"):
            assert (tables / f"{name}.{ext}").stat().st_size > 0
        # every LaTeX table compiles as a user pastes it into a paper
        latex = compile_latex((tables / f"{name}.tex").read_text(), tmp_path)
        assert latex.returncode == 0, f"{name}.tex: {latex.stdout[-2000:]}"
    assert (tables / f"paired-{pair}.md").exists()
    # an export for annotators per model (the labels table waits for their files)
    assert all(
        (tmp_path / "results" / "annotations" / f"{m}-demo.csv").exists()
        for m in ("single-K192", "single-K640")
    )
    assert_dmpo_row(tmp_path / "results")
    for fig in (
        "passk-demo.png",
        "tasks-demo.png",
        "episodes.png",
        "local_loglik.png",
        "subset_difficulty.png",
        "corpus.png",
    ):
        assert (tmp_path / "results" / "figures" / fig).stat().st_size > 10_000
    rows = {r["model"]: r for r in csv.DictReader(open(tables / "reliability.csv"))}
    succ = {m: float(r["success_attempts_mean"]) for m, r in rows.items()}
    # the horizon bites: K=192's model never solves a task; the share of trajectories whose confirmation
    # falls within K rises with K (none at 192 and 384, about half at 640); K=640 beats K=384 by a
    # margin inside the seeds' spread (no untrained row: include_base off)
    assert "base" not in rows and succ["single-K192"] == 0
    covered = confirmation_within_k(tmp_path / "results" / "horizons")
    assert covered[192] <= covered[384] < covered[640], covered
    assert succ["single-K640"] - succ["single-K384"] >= K640_MARGIN, succ
    assert all(
        m in rows
        for m in (
            "refine-H640-top-50",
            "refine-H640-bottom-50",
            "refine-H640-random-50",
            "refine-H640-tor-top-50",
            "refine-H640-all-100",
            "single-K640@blind",
            "dmpo-single-K640",
        )
    )
    # two teachers on the same tasks: the careful one follows up on what it saw, the blind one does not
    teachers = {r["teacher"]: r for r in csv.DictReader(open(tables / "teachers.csv"))}
    assert set(teachers) == {"careful", "blind"}
    assert float(teachers["careful"]["tor_mean"]) > float(teachers["blind"]["tor_mean"]) + 0.3
    assert teachers["blind"]["K640_model"] == "single-K640@blind"
    # the demo evaluates on its own tasks: their trajectories overlap them, counted and not removed;
    # two of the twelve instructions have 12 words, too short for a 13-gram (named in decontamination.json)
    for root in ("results", "results/sources/blind"):
        stats = json.loads((tmp_path / root / "corpus/train/stats.json").read_text())
        assert stats["decontamination"]["flagged"] == 40 and stats["rows"] == stats["kept"] == 48
        report = json.loads((tmp_path / root / "corpus/decontamination.json").read_text())
        assert report["benchmarks"]["demo"]["tasks_too_short"] == ["archive-docs", "replace-host"]
    assert "careful: 40 of 48 trajectories share a 13-gram" in (tables / "reliability.md").read_text()
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
