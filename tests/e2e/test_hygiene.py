"""Decontamination and the LLM judge as workflow stages, run by Snakemake on the fixture corpus: the
benchmark rule's tasks.json is the reference, the judge is the SCRIPTED server (a fake, started here),
and tokenize reads only what both let through."""

import copy
import json

import pyarrow.parquet as pq
import pytest

from tests.doubles.judge import scripted_server
from tests.helpers import REPO, fixture_rows, snakemake, write_config

pytestmark = pytest.mark.slow

COUNT_ROWS = (REPO / "demo/tasks/count-rows/instruction.md").read_text().strip()


def corpus(tmp_path):
    """The fixture rows, one of them again with a bundled task's instruction, one judged weak."""
    rows = fixture_rows()
    leaked = copy.deepcopy(rows[0])
    first = leaked["conversations"][0]["content"]
    head, rest = first.split("Task Description:\n", 1)
    leaked["conversations"][0]["content"] = (
        f"{head}Task Description:\n{COUNT_ROWS}\n\nCurrent terminal state:{rest.split('Current terminal state:', 1)[1]}"
    )
    weak = copy.deepcopy(rows[1])
    weak["conversations"][1]["content"] = weak["conversations"][1]["content"].replace(
        "<think>", "<think>\nQUALITY=2"
    )
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [*rows, leaked, weak]))
    return path


def test_decontamination_and_the_judge_before_tokenization(tmp_path, tiny_tokenizer_dir):
    with scripted_server() as (url, _):
        cfg = write_config(tmp_path / "config.yaml", {
            "student": {"model": str(tiny_tokenizer_dir)},
            "corpus": {"source": str(corpus(tmp_path))},
            "tokenize": {"shards": 1, "threads": 1},
            "horizons": [64, 256], "split": {"heldout": 0},
            "refine": {"h1": 64, "h2": [256], "rho": [0.5], "selections": ["top"]},
            "eval": {"benchmarks": {"demo": {"format": "harbor", "path": str(REPO / "demo/tasks")}},
                     "sandbox": "local", "backend": "transformers"},
            "decontam": {"enabled": True},
            "judge": {"enabled": True, "endpoint": url, "model": "scripted", "keep": 3, "concurrency": 2},
        })  # fmt: skip
        snakemake(
            [
                "--configfile",
                str(cfg),
                "--directory",
                str(tmp_path),
                "-c2",
                "results/tokens/shard-000.parquet",
            ]
        )
    res = tmp_path / "results/corpus"
    flagged = pq.read_table(res / "decontamination.parquet").to_pylist()
    assert [(r["benchmark"], r["bench_task"]) for r in flagged] == [("demo", "count-rows")]
    verdicts = {r["traj_id"]: r for r in pq.read_table(res / "judge.parquet").to_pylist()}
    assert sorted(r["reason"] or "" for r in verdicts.values()) == ["", "", "", "judge_below_threshold"]
    stats = json.loads((res / "train/stats.json").read_text())
    assert stats["rows"] == 4 and stats["kept"] == 2
    assert stats["removed"] == {"contaminated": 1, "judge_below_threshold": 1}
    assert (
        stats["decontamination"]["benchmarks"] == {"demo": 1} and stats["decontamination"]["removal"] == "on"
    )
    assert stats["judge"]["status"] == {"judged": 4}
    kept = pq.read_table(tmp_path / "results/tokens/shard-000.parquet").column("traj_id").to_pylist()
    assert sorted(kept) == sorted(
        t for t, r in verdicts.items() if not r["reason"] and t != flagged[0]["traj_id"]
    )
