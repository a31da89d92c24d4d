"""Subsets of the scored (H1, H2) pool: Top / Bottom / Random ceil(rho * n), or all of it.

n counts the trajectories that have a score (at least one assistant token in the window). Top and
Bottom order by score, ties broken by traj_id; Random is one seeded permutation of the scored
trajectories (sorted by traj_id first, so the input order does not matter), and its rho subsets
are nested like Top's and Bottom's. `all` keeps the whole pool, scored or not. Same inputs and
seed: byte-identical files.

TOR-Top / TOR-Bottom rank the same trajectories (those with an assistant token in the window, so n
is the same and the budgets are equal) by their TOR (horizon.data.quality, our reconstruction)
instead of a score under theta1: highest (lowest) first, ties by traj_id, trajectories without an
action (no TOR) last. They need no scoring, only the pool and quality.parquet.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from horizon.grid import TOR_SELECTIONS, Subset, rho_token
from horizon.io import write_csv, write_table

log = logging.getLogger("horizon.score.select")

SUBSET_SCHEMA = pa.schema([("traj_id", pa.string()), ("score", pa.float64()), ("rank", pa.int32())])


def keep_count(rho: float | int, n: int) -> int:
    """ceil(rho * n), robust to float noise (0.29 * 100 is 28.999...)."""
    return min(n, math.ceil(round(rho * n, 9)))


def select(scores: list[dict], selection: str, rho: float, seed: int) -> list[dict]:
    """scores: rows with traj_id, score (None when unscored). Returns rows with rank 1..n."""
    scored = sorted((r for r in scores if r["score"] is not None), key=lambda r: r["traj_id"])
    if selection == "all":
        unscored = sorted((r for r in scores if r["score"] is None), key=lambda r: r["traj_id"])
        chosen = sorted(scored, key=lambda r: (-r["score"], r["traj_id"])) + unscored
    else:
        count = keep_count(rho, len(scored))
        if selection == "top":
            chosen = sorted(scored, key=lambda r: (-r["score"], r["traj_id"]))[:count]
        elif selection == "bottom":
            chosen = sorted(scored, key=lambda r: (r["score"], r["traj_id"]))[:count]
        elif selection == "random":
            order = np.random.default_rng(seed).permutation(len(scored))
            chosen = [scored[i] for i in order[:count]]
        else:
            raise ValueError(f"unknown selection {selection!r} (allowed: top, bottom, random, all)")
    return [{"traj_id": r["traj_id"], "score": r["score"], "rank": i + 1} for i, r in enumerate(chosen)]


def select_by_tor(pool: list[dict], tor: dict[str, float], selection: str, rho: float) -> list[dict]:
    """pool: rows with traj_id, n_window_tokens; tor: traj_id -> TOR (NaN without an action)."""
    if selection not in TOR_SELECTIONS:
        raise ValueError(f"unknown selection {selection!r} (allowed: {', '.join(TOR_SELECTIONS)})")
    missing = [r["traj_id"] for r in pool if r["traj_id"] not in tor]
    if missing:
        raise ValueError(
            f"quality.parquet has no TOR for {len(missing)} pool trajectories, e.g. {missing[0]}"
        )
    eligible = [r["traj_id"] for r in pool if r["n_window_tokens"] > 0]
    sign = -1 if selection == "tor-top" else 1
    ranked = sorted(
        eligible, key=lambda t: (math.isnan(tor[t]), sign * tor[t] if not math.isnan(tor[t]) else 0, t)
    )
    chosen = ranked[: keep_count(rho, len(eligible))]
    return [
        {"traj_id": t, "score": None if math.isnan(tor[t]) else tor[t], "rank": i + 1}
        for i, t in enumerate(chosen)
    ]


def write_tor_subset(
    pool_path: str | Path, quality_path: str | Path, selection: str, rho: float, out_path: str | Path
) -> list[dict]:
    pool = pq.read_table(pool_path, columns=["traj_id", "n_window_tokens"]).to_pylist()
    q = pq.read_table(quality_path, columns=["traj_id", "tor"])
    tor = dict(zip(q.column("traj_id").to_pylist(), q.column("tor").to_pylist()))
    chosen = select_by_tor(pool, {k: (math.nan if v is None else v) for k, v in tor.items()}, selection, rho)
    log.info("%s-%s: %d of %d pool trajectories by TOR", selection, rho_token(rho), len(chosen), len(pool))
    write_table(out_path, pa.Table.from_pylist(chosen, schema=SUBSET_SCHEMA))
    return chosen


def write_subset(
    scores_path: str | Path, selection: str, rho: float, seed: int, out_path: str | Path
) -> list[dict]:
    rows = pq.read_table(scores_path).to_pylist()
    chosen = select(rows, selection, rho, seed)
    n = sum(1 for r in rows if r["score"] is not None)
    log.info("%s-%s: %d of %d scored trajectories", selection, rho_token(rho), len(chosen), n)
    write_table(out_path, pa.Table.from_pylist(chosen, schema=SUBSET_SCHEMA))
    return chosen


def summary(
    subsets: Sequence[Subset],
    subset_paths: Sequence[str | Path],
    pool_paths: dict[int, str | Path],
    out_path: str | Path,
    pool_rule: str | None = None,
) -> list[dict]:
    """One row per subset: H2, selection, pct, n, mean score, mean length, mean window tokens, and the
    pool it was drawn from: its rule (score.pool), size and scored size (an assistant token in the window)."""
    pools = {h2: {r["traj_id"]: r for r in pq.read_table(p).to_pylist()} for h2, p in pool_paths.items()}
    out = []
    for sub, path in zip(subsets, subset_paths):
        rows = pq.read_table(path).to_pylist()
        scores = [r["score"] for r in rows if r["score"] is not None]
        pool = pools[sub.h2]
        nan = float("nan")
        out.append(
            {
                "H2": sub.h2,
                "selection": sub.selection,
                "pct": sub.token,
                "n": len(rows),
                "mean_score": float(np.mean(scores)) if scores else nan,
                "mean_length": float(np.mean([pool[r["traj_id"]]["n_tokens"] for r in rows]))
                if rows
                else nan,
                "mean_window_tokens": float(np.mean([pool[r["traj_id"]]["n_window_tokens"] for r in rows]))
                if rows
                else nan,
                "pool_rule": pool_rule or "",
                "pool": len(pool),
                "pool_scored": sum(1 for r in pool.values() if r["n_window_tokens"] > 0),
            }
        )
    write_csv(out_path, out)
    return out
