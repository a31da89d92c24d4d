"""score.pool: the two readings of the scoring pool, scoring trajectories that end inside the window,
and the pool sizes in subsets/summary.csv."""

import csv

import numpy as np
import pyarrow.parquet as pq
import pytest

from horizon import config as hc
from horizon.data.horizons import in_pool, pool_table, write_horizon
from horizon.grid import Subset
from horizon.score.scorer import score_shard
from horizon.score.select import summary, write_subset
from tests.helpers import REPO
from tests.unit.data.test_horizons import ROLES, TURNS, _shard
from tests.unit.score.test_scorer import naive_window_mean, toks  # noqa: F401  (a fixture)


def test_paper_default_is_one_pool_longer_than_h1_and_the_demo_keeps_per_h2():
    assert hc.load(REPO / "config.yaml")["score"]["pool"] == "longer_than_h1"
    assert hc.load(REPO / "demo" / "config.yaml")["score"]["pool"] == "per_h2"
    assert in_pool(13, 12, 16, "longer_than_h1") and not in_pool(12, 12, 16, "longer_than_h1")
    assert in_pool(16, 12, 16, "per_h2") and not in_pool(15, 12, 16, "per_h2")
    with pytest.raises(ValueError, match="score.pool: 'both' is not allowed"):
        in_pool(1, 1, 2, "both")


def test_longer_than_h1_keeps_trajectories_that_end_inside_the_window(tmp_path):
    # a: 14 tokens; c: 12; e: 9 (ends inside (6, 12]); b: 6 (not longer than H1 = 6); d held out
    rows = [("a", ROLES, TURNS), ("b", ROLES[:6], TURNS[:6]), ("c", ROLES[:12], TURNS[:12]),
            ("d", ROLES, TURNS), ("e", ROLES[:9], TURNS[:9])]  # fmt: skip
    shard = _shard(tmp_path, rows)
    k6 = write_horizon([shard], 6, tmp_path / "K6.parquet")
    k12 = write_horizon([shard], 12, tmp_path / "K12.parquet")
    per_h2 = pool_table(k6, k12, 12, {"d"}, "per_h2", 6).to_pylist()
    one_pool = pool_table(k6, k12, 12, {"d"}, "longer_than_h1", 6).to_pylist()
    assert [r["traj_id"] for r in per_h2] == ["a", "c"]
    # window (6, 12]: supervised positions 6, 10, 11; e has only position 6 of them
    assert one_pool == [
        {"traj_id": "a", "n_tokens": 14, "n_window_tokens": 3},
        {"traj_id": "c", "n_tokens": 12, "n_window_tokens": 3},
        {"traj_id": "e", "n_tokens": 9, "n_window_tokens": 1},
    ]


def test_trajectories_shorter_than_h2_are_scored_on_their_own_window(tiny_corpus, toks, tmp_path):  # noqa: F811
    """Batched with a longer one (right padding), each score equals the naive score of its own tokens."""
    shard = tiny_corpus / "tokens.parquet"
    lengths = {t: len(v[0]) for t, v in toks.items()}
    short, long_ = sorted(lengths, key=lengths.get)[:2]
    h1, h2 = 100, lengths[long_]  # the shorter trajectory ends inside (H1, H2]
    assert h1 < lengths[short] < h2
    k1 = write_horizon([shard], h1, tmp_path / "k1.parquet")
    k2 = write_horizon([shard], h2, tmp_path / "k2.parquet")
    pool = pool_table(k1, k2, h2, set(), "longer_than_h1", h1)
    assert set(pool.column("traj_id").to_pylist()) >= {short, long_}
    pq.write_table(pool, tmp_path / "pool.parquet")
    out = tmp_path / "s.parquet"
    score_shard(tmp_path / "pool.parquet", [shard], tiny_corpus / "student", out, h1, h2, 0, 1, chunk=9)
    got = {r["traj_id"]: r for r in pq.read_table(out).to_pylist()}
    for tid in (short, long_):
        ids, roles, _ = toks[tid]
        ref, n = naive_window_mean(tiny_corpus / "student", ids, roles, h1, min(h2, len(ids)))
        assert got[tid]["n_window_tokens"] == n and got[tid]["score"] == pytest.approx(ref, abs=1e-4)


def test_summary_records_the_pool_rule_and_sizes(tmp_path):
    pool = tmp_path / "pool.parquet"
    import pyarrow as pa

    pq.write_table(
        pa.table({"traj_id": ["a", "b", "c", "d"], "n_tokens": pa.array([20, 18, 15, 13], pa.int32()),
                  "n_window_tokens": pa.array([4, 3, 2, 0], pa.int32())}),
        pool,
    )  # fmt: skip
    scores = tmp_path / "scores.parquet"
    pq.write_table(pa.table({"traj_id": ["a", "b", "c", "d"], "score": [-1.0, -2.0, -0.5, None],
                             "n_window_tokens": pa.array([4, 3, 2, 0], pa.int32())}), scores)  # fmt: skip
    subs = [Subset(16, "top", 0.5), Subset(16, "all", 1.0)]
    paths = [tmp_path / f"{s.name}.parquet" for s in subs]
    for s, p in zip(subs, paths):
        write_subset(scores, s.selection, s.rho, 0, p)
    summary(subs, paths, {16: pool}, tmp_path / "summary.csv", pool_rule="longer_than_h1")
    rows = list(csv.DictReader(open(tmp_path / "summary.csv")))
    assert [(r["selection"], r["n"], r["pool"], r["pool_scored"], r["pool_rule"]) for r in rows] == [
        ("top", "2", "4", "3", "longer_than_h1"), ("all", "4", "4", "3", "longer_than_h1")]  # fmt: skip
    assert np.isclose(float(rows[0]["mean_score"]), -0.75)  # c and a
