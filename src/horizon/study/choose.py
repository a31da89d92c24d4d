"""Study settings chosen from a measured corpus: horizons, H1/H2, rho, heldout, pool and shard counts.

Horizons sit at quantiles of the trajectories' token lengths (CPU: the 25th, 50th and 75th percentile,
like the demo's; cluster: the 50th, 75th, 90th and 95th, like the paper's grid, whose horizons cut
the upper tail of its corpus), rounded, and never below the median end of the first answer (so the
shortest horizon still shows whole answers). H1 is the second horizon, the H2s the ones above it.
Every choice comes with one line saying why (`Choice.why`), which `horizon init` prints and writes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from horizon.data.horizons import in_pool
from horizon.score.select import keep_count
from horizon.study.measure import SourceScan

QUANTILES = {"cpu": (0.25, 0.5, 0.75), "cluster": (0.5, 0.75, 0.9, 0.95)}
# trajectories per tokenize shard and per scoring shard on a cluster (the paper: 366k in 16, a 39k pool in 8)
TOKENIZE_PER_SHARD, SCORE_PER_SHARD = 20_000, 5_000


@dataclass
class Choice:
    key: str  # dotted config key
    value: Any
    why: str  # one line


def quantile(values: np.ndarray, q: float) -> int:
    """An observed value at quantile q (no interpolation between trajectories)."""
    return int(np.quantile(values, q, method="inverted_cdf"))


def step_of(x: int) -> int:
    """The rounding step of a horizon near x: an eighth to a sixteenth of it, a power of two, at least 16."""
    return max(16, 2 ** (max(x, 1).bit_length() - 4))


def round_horizon(x: float, up: bool = False) -> int:
    step = step_of(int(x))
    return int((math.ceil(x / step) if up else max(1, round(x / step))) * step)


def pick_horizons(scan: SourceScan, mode: str) -> tuple[list[int], str]:
    """Horizons at the mode's length quantiles, rounded, distinct, none below the median first-answer end."""
    lengths, ends = scan.lengths, scan.first_answer_ends
    floor = round_horizon(quantile(ends, 0.5), up=True)
    out: list[int] = []
    for q in QUANTILES[mode]:
        k = max(round_horizon(quantile(lengths, q)), floor)
        if out and k <= out[-1]:
            k = out[-1] + step_of(out[-1])
        out.append(k)
    qs = "/".join(f"{round(q * 100)}th" for q in QUANTILES[mode])
    why = (
        f"the {qs} percentiles of the token lengths ({describe(lengths)}), rounded, none below "
        f"{floor} (where half of the first answers have ended)"
    )
    return out, why


def describe(lengths: np.ndarray) -> str:
    if not len(lengths):
        return "no trajectory"
    return (
        f"min {int(lengths.min())}, 25th {quantile(lengths, 0.25)}, median {quantile(lengths, 0.5)}, "
        f"75th {quantile(lengths, 0.75)}, max {int(lengths.max())}"
    )


def pool_size(scan: SourceScan, h1: int, h2: int, rule: str, held: int = 0) -> int:
    """Trajectories of the (H1, H2] scoring pool (estimated from the sample), the held-out ones excluded."""
    n = scan.estimate(sum(in_pool(len(t), h1, h2, rule) for t in scan.sample))
    return max(0, n - held)


def long_count(scan: SourceScan, k: int) -> int:
    """Trajectories at least k tokens long (the heldout rule's candidates at k = max horizon)."""
    return scan.estimate(int(np.count_nonzero(scan.lengths >= k)))


def heldout_choice(scan: SourceScan, max_k: int, mode: str) -> Choice:
    long = long_count(scan, max_k)
    if mode == "cpu":
        why = (
            f"{scan.completed} trajectories: all of them train; the diagnostics run in-sample, as in the demo "
            f"(a quarter of the {long} trajectories >= {max_k} tokens could be held out)"
        )
        return Choice("split.heldout", 0, why)
    n = min(256, long // 4)
    why = f"{n}: the paper's 256 at most, and a quarter of the {long} trajectories >= {max_k} tokens (the most the rule takes)"
    return Choice("split.heldout", n, why)


def rho_choice(pool: int, mode: str) -> Choice:
    wanted = [0.5] if mode == "cpu" else [0.25, 0.5, 0.75]
    kept = [r for r in wanted if 0 < keep_count(r, pool) < pool]
    counts = ", ".join(f"{r} keeps {keep_count(r, pool)}" for r in kept)
    if not kept:
        return Choice(
            "refine.rho", [0.5], f"a pool of {pool} is too small for a selection to keep less than all of it"
        )
    return Choice("refine.rho", kept, f"of a pool of {pool}: {counts}")


def shards_choice(key: str, n: int, per_shard: int, mode: str, what: str) -> Choice:
    if mode == "cpu":
        shards = 1 if n < 200 else 2
        return Choice(key, shards, f"{n} {what} on 2 cores")
    shards = min(64, max(1, math.ceil(n / per_shard)))
    return Choice(key, shards, f"{n} {what}, about {per_shard:,} per job")


def refine_choices(horizons: Sequence[int], scan: SourceScan, mode: str, held: int) -> list[Choice]:
    """H1 = the second horizon; H2 = the larger ones; the pool rule, its size and rho."""
    h1 = horizons[1] if len(horizons) > 1 else horizons[0]
    h2 = [k for k in horizons if k > h1]
    pool = pool_size(scan, h1, h2[0], "longer_than_h1", held) if h2 else 0
    return [
        Choice("refine.h1", h1, f"theta1 = single-K{h1}, the second horizon"),
        Choice(
            "refine.h2", h2, "the horizons above H1: single-K<H2> and the refinements compare at equal length"
        ),
        Choice(
            "score.pool",
            "longer_than_h1",
            f"every trajectory longer than H1 (the paper's pool counts): about {pool} here",
        ),
        rho_choice(pool, mode),
        shards_choice("score.shards", pool, SCORE_PER_SHARD, mode, "pool trajectories"),
    ]
