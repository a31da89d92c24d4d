"""DMPO in a reduced demo, as `snakemake --cores 2` runs it: preference data, DMPO, its row in every table."""

import csv
import json

import pyarrow.parquet as pq
import pytest

from tests.helpers import REPO, snakemake, tiny_demo_config

pytestmark = pytest.mark.slow(minutes=4)

# evaluated tasks and, apart from them, training tasks in the same style (demo/train-tasks)
EVAL_TASKS = ["count-rows", "json-version", "sum-numbers", "word-count"]
TRAIN_TASKS = ["count-lines", "read-version", "add-numbers", "count-words"]


def reduced_config(tmp_path):
    return tiny_demo_config(
        tmp_path,
        horizons=[384, 640],
        refine={"h1": 384, "h2": [640], "rho": [0.5], "selections": ["top"], "two_stage_full": False},
        eval={"benchmarks": {"demo": {"tasks": EVAL_TASKS}}},
        dmpo={
            "enabled": True,
            "tasks": {"tasks": TRAIN_TASKS},
            "attempts": 4,
            "pairs_per_task": 2,
            "epochs": 2,
        },
        report={"paired": [["single-K640", "dmpo-single-K640"]]},
    )


def test_dmpo_from_the_best_single_stage_model_appears_in_every_table(tmp_path, local_engine):
    cfg = reduced_config(tmp_path)
    snakemake(["--configfile", str(cfg), "--directory", str(tmp_path), "--profile", str(REPO / "demo" / "profile"),
               "--cores", "2"], timeout=3000)  # fmt: skip
    res = tmp_path / "results"
    pairs = json.loads((res / "dmpo" / "single-K640" / "pairs.json").read_text())
    assert pairs["policy"] == "single-K640" and pairs["tasks"] == len(TRAIN_TASKS)
    assert (
        pairs["attempts"] == 4 * len(TRAIN_TASKS)
        and pairs["pairs"] == pq.read_table(res / "dmpo/single-K640/pairs.parquet").num_rows
    )
    assert pairs["pairs"] == sum(r["pairs"] for r in pairs["per_task"]) > 0
    model = res / "models" / "dmpo-single-K640"
    log = [json.loads(x) for x in (model / "train_log.jsonl").read_text().splitlines()]
    assert log and all(
        {"reward_margin", "reward_accuracy", "reward_chosen", "reward_rejected"} <= set(r) for r in log
    )
    timing = json.loads((model / "timing.json").read_text())
    assert timing["policy"] == "single-K640" and timing["preference_hours"] > 0
    tables = res / "tables"
    for name in ("reliability", "behaviour"):
        assert "DMPO from single-stage K=640" in (tables / f"{name}.md").read_text()
    assert "dmpo-single-K640" in (tables / "tasks.md").read_text()  # a column per model name
    cost = {r["model"]: r for r in csv.DictReader(open(tables / "cost.csv"))}
    assert float(cost["dmpo-single-K640"]["total_hours"]) > float(cost["single-K640"]["total_hours"])
    rel = {r["model"]: r for r in csv.DictReader(open(tables / "reliability.csv"))}
    assert int(rel["dmpo-single-K640"]["n_tasks"]) == len(EVAL_TASKS)
    assert (
        "DMPO from single-stage K=640" in (tables / "paired-single-K640-vs-dmpo-single-K640.md").read_text()
    )
    print((tables / "reliability.md").read_text())
