import logging

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from horizon.data.horizons import (
    heldout_ids,
    horizon_row,
    in_pool,
    pool_table,
    step_starts,
    write_heldout,
    write_horizon,
    write_pool,
)
from horizon.data.tokens import iter_row_range, shard_range

# turn:  0 0 0 | 1 1 1 1 | 2 2 | 3 3 3 | 4 4
# role:  0 0 0 | 0 1 1 1 | 0 0 | 0 1 1 | 0 1   (assistant turns 1, 3 and 4; header token role 0)
ROLES = np.array([0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 0, 1], dtype=np.int8)
TURNS = np.array([0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 3, 4, 4], dtype=np.int16)


def test_step_starts_and_horizon_row():
    assert step_starts(ROLES, TURNS).tolist() == [4, 10, 13]
    assert horizon_row(ROLES, TURNS, 4) == {
        "n_tokens": 14,
        "kept_tokens": 4,
        "kept_assistant_tokens": 0,
        "decision_steps": 0,
        "total_assistant_tokens": 6,
        "total_decision_steps": 3,
    }
    r = horizon_row(ROLES, TURNS, 11)  # cuts turn 3 after its first supervised token
    assert (r["kept_assistant_tokens"], r["decision_steps"]) == (4, 2)
    r = horizon_row(ROLES, TURNS, 100)
    assert (r["kept_tokens"], r["kept_assistant_tokens"], r["decision_steps"]) == (14, 6, 3)


def test_adjacent_assistant_turns_count_separately():
    roles = np.array([1, 1, 1, 1], dtype=np.int8)
    turns = np.array([1, 1, 3, 3], dtype=np.int16)
    assert step_starts(roles, turns).tolist() == [0, 2]


def _shard(tmp_path, rows):
    from horizon.data.tokens import TOKENS_SCHEMA

    table = pa.Table.from_pylist(
        [
            {
                "traj_id": t,
                "input_ids": list(range(len(r))),
                "roles": list(r),
                "turns": list(u),
                "n_tokens": len(r),
            }
            for t, r, u in rows
        ],
        schema=TOKENS_SCHEMA,
    )
    p = tmp_path / "shard.parquet"
    pq.write_table(table, p)
    return p


def test_pool_window_tokens_and_exact_h2(tmp_path):
    short = (np.zeros(8, np.int8), np.zeros(8, np.int16))
    shard = _shard(
        tmp_path, [("a", ROLES, TURNS), ("b", *short), ("c", ROLES[:12], TURNS[:12]), ("d", ROLES, TURNS)]
    )
    h1 = write_horizon([shard], 6, tmp_path / "K6.parquet")
    h2 = write_horizon([shard], 12, tmp_path / "K12.parquet")
    pool = pool_table(h1, h2, 12, exclude={"d"}).to_pylist()
    # window (6, 12]: positions 6, 10, 11 are supervised
    # b is shorter than H2 (excluded), c is exactly H2 long (kept), d is held out
    assert pool == [
        {"traj_id": "a", "n_tokens": 14, "n_window_tokens": 3},
        {"traj_id": "c", "n_tokens": 12, "n_window_tokens": 3},
    ]


def test_heldout_is_stable_and_capped():
    ids = [f"t{i}" for i in range(40)]
    lengths = [100 if i % 2 else 10 for i in range(40)]
    a = heldout_ids(ids, lengths, 50, 3, seed=1)
    assert a == heldout_ids(list(reversed(ids)), list(reversed(lengths)), 50, 3, seed=1)
    assert len(a) == 3 and all(int(t[1:]) % 2 for t in a)
    assert a != heldout_ids(ids, lengths, 50, 3, seed=2)
    assert len(heldout_ids(ids, lengths, 50, 100, seed=1)) == 5  # at most a quarter of the 20 long ones


def test_horizon_file_types_and_its_log_line(tmp_path, caplog):
    """The K file's columns are int32 (also when no trajectory is left); the log says how many
    trajectories the horizon truncates: longer than K, not K long."""
    short = (np.zeros(8, np.int8), np.zeros(8, np.int16))
    shard = _shard(
        tmp_path, [("a", ROLES, TURNS), ("b", *short), ("c", ROLES[:12], TURNS[:12]), ("d", ROLES, TURNS)]
    )
    with caplog.at_level(logging.INFO, logger="horizon.data.horizons"):
        write_horizon([shard], 12, tmp_path / "K12.parquet")
    # kept 12, 8, 12, 12 tokens; decision steps 2, 0, 2, 2; a and d (14 tokens) are truncated, c is 12 long
    assert caplog.messages == [
        "K=12: 4 trajectories, 2 truncated (50%), mean kept tokens 11, mean decision steps 1.5"
    ]
    expected = {"traj_id": pa.string()} | {
        c: pa.int32()
        for c in ("n_tokens", "kept_tokens", "kept_assistant_tokens", "decision_steps",
                  "total_assistant_tokens", "total_decision_steps")
    }  # fmt: skip
    with caplog.at_level(logging.INFO, logger="horizon.data.horizons"):
        write_horizon([shard], 8, tmp_path / "K8.parquet")  # 3 of 4 longer than 8
    assert (
        caplog.messages[-1]
        == "K=8: 4 trajectories, 3 truncated (75%), mean kept tokens 8, mean decision steps 0.8"
    )
    schema = pq.read_schema(tmp_path / "K12.parquet")
    assert dict(zip(schema.names, schema.types)) == expected
    empty = write_horizon([_shard(tmp_path, [])], 12, tmp_path / "K-empty.parquet")
    assert empty.num_rows == 0 and dict(zip(empty.schema.names, empty.schema.types)) == expected


def test_heldout_counts_trajectories_exactly_min_tokens_long_and_warns_when_short(caplog):
    ids, lengths = ["a", "b", "c", "d"], [20, 20, 20, 20]  # all exactly min_tokens long: all eligible
    with caplog.at_level(logging.WARNING, logger="horizon.data.horizons"):
        assert len(heldout_ids(ids, lengths, 20, 1, seed=0)) == 1  # a quarter of 4
    assert caplog.messages == []  # as many as requested: nothing to say
    with caplog.at_level(logging.WARNING, logger="horizon.data.horizons"):
        assert len(heldout_ids(ids, lengths, 20, 2, seed=0)) == 1
    assert caplog.messages == ["held out 1 of the 2 requested long trajectories (only 4 are >= 20 tokens)"]


def test_heldout_and_pool_files(tmp_path, caplog):
    """heldout.parquet holds the held-out trajectories with their lengths; the pool file leaves them
    out and logs its size, the held-out count and the trajectories without a window token."""
    rows = [("a", ROLES, TURNS), ("b", np.zeros(8, np.int8), np.zeros(8, np.int16)),
            ("c", ROLES[:12], TURNS[:12]), ("d", ROLES, TURNS), ("e", ROLES[:11], TURNS[:11])]  # fmt: skip
    shard = _shard(tmp_path, rows)
    k6 = write_horizon([shard], 6, tmp_path / "K6.parquet")
    k12 = write_horizon([shard], 12, tmp_path / "K12.parquet")
    lengths = dict(zip(k12.column("traj_id").to_pylist(), k12.column("n_tokens").to_pylist()))
    held = write_heldout(tmp_path / "K12.parquet", 8, 1, 7, tmp_path / "heldout.parquet")
    assert held == heldout_ids(list(lengths), list(lengths.values()), 8, 1, 7) and len(held) == 1
    got = pq.read_table(tmp_path / "heldout.parquet")
    assert got.schema == pa.schema([("traj_id", pa.string()), ("n_tokens", pa.int32())])
    assert got.to_pylist() == [{"traj_id": held[0], "n_tokens": lengths[held[0]]}]
    assert (
        write_heldout(tmp_path / "K12.parquet", 8, 0, 7, tmp_path / "none.parquet") == []
    )  # split.heldout: 0
    assert pq.read_schema(tmp_path / "none.parquet") == got.schema
    pq.write_table(
        pa.table({"traj_id": ["d"]}), tmp_path / "heldout.parquet"
    )  # d held out, whatever the hash
    with caplog.at_level(logging.INFO, logger="horizon.data.horizons"):
        pool = write_pool(
            tmp_path / "K6.parquet", tmp_path / "K12.parquet", tmp_path / "heldout.parquet", 12,
            tmp_path / "pool.parquet", rule="longer_than_h1", h1=6,
        )  # fmt: skip
    expected = pool_table(k6, k12, 12, {"d"}, "longer_than_h1", 6)
    assert pq.read_table(tmp_path / "pool.parquet").equals(expected) and pool.equals(expected)
    assert [r["traj_id"] for r in expected.to_pylist()] == ["a", "c", "e", "b"]
    assert caplog.messages[-1] == (
        "pool H2=12 (longer_than_h1): 4 trajectories (1 held out excluded, 1 without an assistant token in the window)"
    )
    write_pool(tmp_path / "K6.parquet", tmp_path / "K12.parquet", tmp_path / "heldout.parquet", 12,
               tmp_path / "pool2.parquet")  # fmt: skip
    assert [r["traj_id"] for r in pq.read_table(tmp_path / "pool2.parquet").to_pylist()] == ["a", "c"]
    assert pq.read_schema(tmp_path / "pool2.parquet") == pa.schema(
        [("traj_id", pa.string()), ("n_tokens", pa.int32()), ("n_window_tokens", pa.int32())]
    )


def test_pool_rule_errors_name_the_key():
    with pytest.raises(ValueError, match=r"^score\.pool longer_than_h1 needs H1$"):
        in_pool(10, None, 12, "longer_than_h1")
    with pytest.raises(ValueError, match=r"allowed: longer_than_h1, per_h2\)$"):
        in_pool(10, 6, 12, "both")
    empty = pool_table(pa.table({"traj_id": [], "kept_assistant_tokens": []}),
                       pa.table({"traj_id": [], "n_tokens": [], "kept_assistant_tokens": []}), 12, set())  # fmt: skip
    assert empty.schema.names == ["traj_id", "n_tokens", "n_window_tokens"] and empty.num_rows == 0


def test_shards_cover_every_row_once(tmp_path):
    n = 103
    p = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": list(range(n))}), p, row_group_size=10)
    seen = []
    for i in range(7):
        lo, hi = shard_range(n, i, 7)
        got = [v for b in iter_row_range(p, lo, hi, ["x"], 4) for v in b.column("x").to_pylist()]
        assert got == list(range(lo, hi))
        seen += got
    assert seen == list(range(n))
