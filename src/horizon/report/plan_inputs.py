"""What `horizon plan` computes from: trajectory lengths, throughputs, the profile's GPUs, pool sizes.

Each is assumed before anything runs (config `plan`, our estimates: `assumed_lengths`,
`assumed_rates`) and replaced by what finished jobs measured where there is such a job
(horizon.report.measured); the profile's GPUs per job are read as Snakemake reads them
(`read_profile`). horizon.report.plan turns them into stages, GPU-hours and wall time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from horizon.config import gpus_of

# ---------------------------------------------------------------------------------------------
# trajectory lengths: an assumed survival curve or the measured lengths


def _linear(x: float, x0: float, s0: float, x1: float, s1: float) -> float:
    return s0 + (s1 - s0) * (x - x0) / (x1 - x0)


@dataclass
class Lengths:
    """Trajectory lengths as the plan knows them: N x a survival curve S(x) = P(length > x), or measured."""

    count: int
    survival: list[tuple[float, float]] | None = None
    measured: np.ndarray | None = None
    source: str = ""

    def _integral(self, a: float, b: float) -> float:
        """The integral of S over [a, b] (S linear between its points, 0 after the last)."""
        total = 0.0
        for (x0, s0), (x1, s1) in zip(self.survival, self.survival[1:]):
            lo, hi = max(a, x0), min(b, x1)
            if hi > lo:
                total += (_linear(lo, x0, s0, x1, s1) + _linear(hi, x0, s0, x1, s1)) / 2 * (hi - lo)
        return total

    def below(self, x: float) -> float:
        """The `longer` threshold that means "at least x tokens" (lengths are whole tokens when measured)."""
        return x - 0.5 if self.measured is not None else x

    def longer(self, x: float) -> float:
        """How many trajectories are longer than x tokens."""
        if self.measured is not None:
            return float(np.count_nonzero(self.measured > x))
        return self.count * self._survival_at(x)

    def _survival_at(self, x: float) -> float:
        pts = self.survival
        for (x0, s0), (x1, s1) in zip(pts, pts[1:]):
            if x0 <= x <= x1:
                return _linear(x, x0, s0, x1, s1)
        return pts[0][1] if x < pts[0][0] else 0.0

    def tokens(self, k: float, longer_than: float = 0.0) -> float:
        """sum of min(length, k) over the trajectories longer than `longer_than`."""
        if self.measured is not None:
            sel = self.measured[self.measured > longer_than]
            return float(np.minimum(sel, k).sum())
        if k <= longer_than:
            return k * self.longer(longer_than)
        # min(n, k) 1{n > a} = integral over x in [0, k) of 1{n > max(x, a)}
        return self.count * (longer_than * self._survival_at(longer_than) + self._integral(longer_than, k))


def assumed_lengths(plan_cfg: Mapping) -> Lengths:
    pts = [(float(x), float(s)) for x, s in plan_cfg["length_survival"]]
    if any(b[0] <= a[0] or b[1] > a[1] for a, b in zip(pts, pts[1:])) or pts[-1][1] != 0:
        raise ValueError(
            "config key plan.length_survival: lengths must increase, fractions must not, and the last must be 0"
        )
    return Lengths(
        plan_cfg["trajectories"], survival=pts, source="assumed (plan.trajectories, plan.length_survival)"
    )


# ---------------------------------------------------------------------------------------------
# what the plan assumes, and what finished jobs measured instead


@dataclass
class Rates:
    tokenize: float  # tokens/s of one tokenize job
    train: float  # tokens/s per GPU (per process on CPU)
    score: float
    rollout_s: dict[str, float]  # seconds of one attempt, per benchmark
    sources: dict[str, str] = field(default_factory=dict)


def assumed_rates(plan_cfg: Mapping, benches) -> Rates:
    def src(key: str, unit: str) -> str:
        return f"{plan_cfg[key]:,.0f} {unit}, assumed (config plan.{key})"

    return Rates(
        plan_cfg["tokenize_tokens_per_s"],
        plan_cfg["train_tokens_per_gpu_s"],
        plan_cfg["score_tokens_per_gpu_s"],
        {b: plan_cfg["rollout_seconds_per_attempt"] for b in benches},
        {
            "tokenize": src("tokenize_tokens_per_s", "tokens/s per job"),
            "train": src("train_tokens_per_gpu_s", "tokens/s per GPU"),
            "score": src("score_tokens_per_gpu_s", "tokens/s per GPU"),
            "rollout": src("rollout_seconds_per_attempt", "s per attempt"),
        },
    )


@dataclass
class Profile:
    """GPUs per job as the profile asks for them (0 = a CPU job), and how many jobs run at once."""

    train_gpus: int
    train_nodes: int
    score_gpus: int
    rollout_gpus: int
    jobs: int | None
    name: str

    @property
    def train_world(self) -> int:
        return self.train_gpus * self.train_nodes


def read_profile(profile_dir: str | Path) -> Profile:
    """The profile's per-rule GPUs, with YTE evaluated against this environment (as Snakemake does)."""
    import yte

    path = Path(profile_dir) / "config.yaml"
    if not path.exists():
        raise FileNotFoundError(f"no profile at {path} (give --profile a directory holding config.yaml)")
    with open(path) as fh:
        prof = yte.process_yaml(fh, require_use_yte=True) or {}
    res = prof.get("set-resources") or {}
    train = res.get("train_single") or {}
    return Profile(
        train_gpus=gpus_of(train) or 0,
        train_nodes=int(train.get("nodes") or 1),
        score_gpus=gpus_of(res.get("score") or {}) or 0,
        rollout_gpus=gpus_of(res.get("rollout") or {}) or 0,
        jobs=prof.get("jobs"),
        name=str(profile_dir),
    )


@dataclass
class Pool:
    count: float  # trajectories in the pool
    scored: float  # with an assistant token in the window
    tokens: float  # sum of min(length, H2) over the pool
