"""Horizon views of the token shards: what the first K tokens of each trajectory hold.

Horizon K = the first K tokens of the serialized trajectory (a clean prefix; LLaMA-Factory's
`cutoff_len` instead splices the last partial turn, a known deviation). The induced decision-step
horizon H_K is the number of assistant turns whose first supervised token lies inside the first K
tokens. The scoring pool of (H1, H2) holds the trajectories at least H2 tokens long (score.pool:
per_h2) or every trajectory longer than H1 (longer_than_h1).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from horizon.data.tokens import iter_token_rows
from horizon.io import write_table

log = logging.getLogger("horizon.data.horizons")

HORIZON_SCHEMA = pa.schema(
    [
        ("traj_id", pa.string()),
        ("n_tokens", pa.int32()),
        ("kept_tokens", pa.int32()),
        ("kept_assistant_tokens", pa.int32()),
        ("decision_steps", pa.int32()),
        ("total_assistant_tokens", pa.int32()),
        ("total_decision_steps", pa.int32()),
    ]
)


def step_starts(roles: np.ndarray, turns: np.ndarray) -> np.ndarray:
    """Positions of the first supervised token of each assistant turn."""
    sup = roles == 1
    first = sup.copy()
    first[1:] &= ~sup[:-1] | (turns[1:] != turns[:-1])
    return np.flatnonzero(first)


def horizon_row(roles: np.ndarray, turns: np.ndarray, k: int) -> dict:
    starts = step_starts(roles, turns)
    n = len(roles)
    return {
        "n_tokens": n,
        "kept_tokens": min(n, k),
        "kept_assistant_tokens": int(np.count_nonzero(roles[:k] == 1)),
        "decision_steps": int(np.searchsorted(starts, k)),
        "total_assistant_tokens": int(np.count_nonzero(roles == 1)),
        "total_decision_steps": len(starts),
    }


def horizon_table(token_shards: Sequence[str | Path], k: int) -> pa.Table:
    rows = [
        {"traj_id": tid, **horizon_row(row["roles"], row["turns"], k)}
        for tid, row in iter_token_rows(token_shards, ("roles", "turns"), batch_rows=256)
    ]
    return pa.Table.from_pylist(rows, schema=HORIZON_SCHEMA)


def write_horizon(token_shards: Sequence[str | Path], k: int, out_path: str | Path) -> pa.Table:
    table = horizon_table(token_shards, k)
    n = table.num_rows
    if n:
        kept = np.asarray(table.column("kept_tokens"))
        steps = np.asarray(table.column("decision_steps"))
        truncated = int(np.count_nonzero(np.asarray(table.column("n_tokens")) > k))
        log.info(
            "K=%d: %d trajectories, %d truncated (%.0f%%), mean kept tokens %.0f, mean decision steps %.1f",
            k,
            n,
            truncated,
            100 * truncated / n,
            kept.mean(),
            steps.mean(),
        )
    write_table(out_path, table)
    return table


def heldout_ids(
    traj_ids: Sequence[str], n_tokens: Sequence[int], min_tokens: int, count: int, seed: int
) -> list[str]:
    """A stable held-out set among trajectories at least `min_tokens` long (chosen by seeded hash).

    At most a quarter of the long trajectories is held out, so that training keeps long examples.
    """
    long = [t for t, n in zip(traj_ids, n_tokens) if n >= min_tokens]
    take = min(count, len(long) // 4)
    if take < count:
        log.warning(
            "held out %d of the %d requested long trajectories (only %d are >= %d tokens)",
            take,
            count,
            len(long),
            min_tokens,
        )
    ranked = sorted(long, key=lambda t: hashlib.sha256(f"{seed}:{t}".encode()).hexdigest())
    return sorted(ranked[:take])


def write_heldout(
    horizon_file: str | Path, min_tokens: int, count: int, seed: int, out_path: str | Path
) -> list[str]:
    t = pq.read_table(horizon_file, columns=["traj_id", "n_tokens"])
    ids = heldout_ids(
        t.column("traj_id").to_pylist(), t.column("n_tokens").to_pylist(), min_tokens, count, seed
    )
    n_of = dict(zip(t.column("traj_id").to_pylist(), t.column("n_tokens").to_pylist()))
    write_table(
        out_path,
        pa.table(
            {"traj_id": pa.array(ids, pa.string()), "n_tokens": pa.array([n_of[i] for i in ids], pa.int32())}
        ),
    )
    return ids


POOL_SCHEMA = pa.schema([("traj_id", pa.string()), ("n_tokens", pa.int32()), ("n_window_tokens", pa.int32())])


POOL_RULES = ("longer_than_h1", "per_h2")


def in_pool(n_tokens: int, h1: int | None, h2: int, rule: str) -> bool:
    """score.pool: per_h2 keeps trajectories at least H2 long; longer_than_h1 every one longer than H1."""
    if rule == "per_h2":
        return n_tokens >= h2
    if rule == "longer_than_h1":
        if h1 is None:
            raise ValueError("score.pool longer_than_h1 needs H1")
        return n_tokens > h1
    raise ValueError(f"score.pool: {rule!r} is not allowed (allowed: {', '.join(POOL_RULES)})")


def pool_table(
    h1_table: pa.Table,
    h2_table: pa.Table,
    h2: int,
    exclude: set[str],
    rule: str = "per_h2",
    h1: int | None = None,
) -> pa.Table:
    """The pool's trajectories (not held out; `in_pool`), with their assistant tokens in (H1, H2].

    Sorted by length, longest first, then traj_id: scoring shards take every n-th row, which
    balances their work, and batches of neighbours have similar lengths.
    """
    a1 = dict(
        zip(h1_table.column("traj_id").to_pylist(), h1_table.column("kept_assistant_tokens").to_pylist())
    )
    rows = []
    for tid, n, a2 in zip(
        h2_table.column("traj_id").to_pylist(),
        h2_table.column("n_tokens").to_pylist(),
        h2_table.column("kept_assistant_tokens").to_pylist(),
    ):
        if in_pool(n, h1, h2, rule) and tid not in exclude:
            rows.append({"traj_id": tid, "n_tokens": n, "n_window_tokens": a2 - a1[tid]})
    rows.sort(key=lambda r: (-r["n_tokens"], r["traj_id"]))
    return pa.Table.from_pylist(rows, schema=POOL_SCHEMA)


def write_pool(
    h1_file, h2_file, heldout_file, h2: int, out_path, rule: str = "per_h2", h1: int | None = None
):
    exclude = set(pq.read_table(heldout_file, columns=["traj_id"]).column("traj_id").to_pylist())
    table = pool_table(pq.read_table(h1_file), pq.read_table(h2_file), h2, exclude, rule, h1)
    no_window = sum(1 for x in table.column("n_window_tokens").to_pylist() if x == 0)
    log.info(
        "pool H2=%d (%s): %d trajectories (%d held out excluded, %d without an assistant token in the window)",
        h2,
        rule,
        table.num_rows,
        len(exclude),
        no_window,
    )
    write_table(out_path, table)
    return table
