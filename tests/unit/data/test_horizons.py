import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from horizon.data.horizons import heldout_ids, horizon_row, pool_table, step_starts, write_horizon
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
