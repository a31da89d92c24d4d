"""Two scripted teachers (careful and blind) through the real harness and the data stages, run by
Snakemake: both corpora, their TOR, the training corpora on common tasks, the corpus table and a
TOR-selected subset (no training needed: TOR selection scores nothing under theta1)."""

import json

import pyarrow.parquet as pq
import pytest

from tests.helpers import DEMO_TASKS, snakemake, tiny_demo_config

pytestmark = pytest.mark.slow

TARGETS = [
    "results/tables/corpus.md",
    "results/figures/corpus.png",
    "results/subsets/H640/tor-top-50.parquet",
    "results/sources/blind/horizons/K640.parquet",
]


def test_two_teachers_differ_in_tor_and_share_their_tasks(tmp_path, local_engine):
    cfg = tiny_demo_config(tmp_path, teachers=True)
    snakemake(
        ["--configfile", str(cfg), "--directory", str(tmp_path), "--cores", "2", *TARGETS], timeout=1200
    )
    res = tmp_path / "results"
    careful = json.loads((res / "corpus/statistics.json").read_text())
    blind = json.loads((res / "sources/blind/corpus/statistics.json").read_text())
    n = len(DEMO_TASKS) * 4  # 4 variants per task
    assert careful["trajectories"] == blind["trajectories"] == n
    # the careful teacher inspects first: its actions use what it saw; the blind one acts on the task alone
    assert careful["tor"]["mean"] > blind["tor"]["mean"] + 0.3
    assert careful["commands"]["observations"] > blind["commands"]["observations"]
    for root in (res, res / "sources/blind"):
        stats = json.loads((root / "corpus/train/stats.json").read_text())
        assert stats["common_tasks"] == {"tasks": len(DEMO_TASKS), "sources": ["blind", "careful"]}
        assert stats["kept"] == n and stats["rows"] == n
    md = (res / "tables/corpus.md").read_text()
    assert "| statistic | careful | blind |" in md and "| training trajectories | 16 | 16 |" in md
    subset = pq.read_table(res / "subsets/H640/tor-top-50.parquet").to_pylist()
    pool = [r["traj_id"] for r in pq.read_table(res / "horizons/pool-H384-640.parquet").to_pylist()
            if r["n_window_tokens"] > 0]  # fmt: skip
    assert len(subset) == -(-len(pool) // 2) and {r["traj_id"] for r in subset} <= set(pool)
    assert [r["score"] for r in subset] == sorted((r["score"] for r in subset), reverse=True)
