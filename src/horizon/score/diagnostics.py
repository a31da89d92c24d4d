"""Horizon diagnostics: per-step log-likelihood curves, the bias proxy and local difficulty.

These are OUR RECONSTRUCTION of the paper's diagnostics (it gives no formula):

- per-step log-likelihood: for each decision step (assistant turn) of a trajectory, the mean
  log p(x_t | x_<t) of its supervised tokens, teacher-forced under a model;
- bias proxy B(H) = mean, over every supervised token of the held-out trajectories (up to
  `diagnostics.max_tokens` tokens each), of log p_ref(x_t) - log p_H(x_t), where ref is the
  longest-horizon single-stage model and H another one (positive: the horizon-H model fits the
  full trajectories worse). Reported overall, inside the first H tokens and beyond them;
- local difficulty = trailing moving average over w decision steps (`diagnostics.window`, 4) of
  the per-step mean log-likelihood (lower = harder).

Held-out trajectories (results/horizons/heldout.parquet) were never trained on. When the config
holds none out (`split.heldout: 0`, the demo), the longest pool trajectories are used instead and
every output says "in-sample".
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from horizon.data.horizons import step_starts
from horizon.data.tokens import iter_token_rows
from horizon.grid import ModelName
from horizon.io import pyplot, save_figure, write_csv, write_table
from horizon.progress import Progress

log = logging.getLogger("horizon.score.diagnostics")


def per_step(logprobs: np.ndarray, positions: np.ndarray, roles: np.ndarray, turns: np.ndarray) -> list[dict]:
    """Group per-token log-probs (at `positions`) by decision step."""
    starts = step_starts(roles, turns)
    step_of = np.searchsorted(starts, positions, side="right") - 1
    out = []
    for s in np.unique(step_of):
        sel = step_of == s
        out.append(
            {
                "step": int(s),
                "start": int(starts[s]),
                "n_tokens": int(sel.sum()),
                "mean_ll": float(logprobs[sel].mean()),
            }
        )
    return out


def local_difficulty(step_ll: Sequence[float], window: int) -> np.ndarray:
    """Trailing moving average over `window` decision steps."""
    x = np.asarray(step_ll, dtype=float)
    c = np.concatenate([[0.0], np.cumsum(x)])
    idx = np.arange(1, len(x) + 1)
    lo = np.maximum(0, idx - window)
    return (c[idx] - c[lo]) / (idx - lo)


def trajectory_logprobs(scorer, ids: np.ndarray, roles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    targets = roles == 1
    targets[0] = False
    lp = scorer.logprobs(ids[None, :], targets[None, :])[0]
    return lp, np.flatnonzero(targets)


def _sample(ids: list[str], k: int, seed: int) -> list[str]:
    ids = sorted(ids)
    if len(ids) <= k:
        return ids
    return sorted(np.random.default_rng(seed).choice(ids, size=k, replace=False).tolist())


def _eval_sample(heldout_path, pool_paths, max_trajectories: int, seed: int) -> tuple[list[str], str]:
    """The trajectories the curves and the bias proxy are computed on, and what kind of sample they are."""
    heldout = pq.read_table(heldout_path).column("traj_id").to_pylist()
    if heldout:
        return _sample(heldout, max_trajectories, seed), "heldout"
    log.warning(
        "no held-out trajectories (split.heldout: 0): diagnostics use the longest pool trajectories, in-sample"
    )
    longest = pool_paths[max(pool_paths)]
    return _sample(pq.read_table(longest).column("traj_id").to_pylist(), max_trajectories, seed), "in-sample"


def _subset_samples(pool_paths, subset_paths, max_trajectories: int, seed: int) -> dict[str, list[str]]:
    """Under theta1: Top and Bottom of the most selective shared percentage, and the pool, per H2."""
    out: dict[str, list[str]] = {}
    for h2, pool in pool_paths.items():
        pcts = sorted({p for (h, s, p) in subset_paths if h == h2 and s in ("top", "bottom")}, key=float)
        both = [p for p in pcts if (h2, "top", p) in subset_paths and (h2, "bottom", p) in subset_paths]
        if both:
            p = both[0]
            for s in ("top", "bottom"):
                ids = pq.read_table(subset_paths[(h2, s, p)]).column("traj_id").to_pylist()
                out[f"H{h2}-{s}-{p}"] = _sample(ids, max_trajectories, seed)
        out[f"H{h2}-pool"] = _sample(
            pq.read_table(pool).column("traj_id").to_pylist(), max_trajectories, seed
        )
    return out


def _curve_rows(scorer, h: int, set_name: str, tid: str, tok: dict, window: int) -> tuple[list[dict], tuple]:
    """Per-step rows of one trajectory under the horizon-h model, and its per-token log-probs."""
    lp, pos = trajectory_logprobs(scorer, tok["input_ids"], tok["roles"].copy())
    steps = per_step(lp, pos, tok["roles"], tok["turns"])
    local = local_difficulty([s["mean_ll"] for s in steps], window)
    rows = [
        {
            "model": str(ModelName.single(h)),
            "horizon": h,
            "set": set_name,
            "traj_id": tid,
            **s,
            "local_ll": float(loc),
        }
        for s, loc in zip(steps, local)
    ]
    return rows, (lp, pos)


def run(
    models: dict[int, str],
    heldout_path: str | Path,
    pool_paths: dict[int, str],
    subset_paths: dict[tuple[int, str, str], str],
    token_shards: Sequence[str],
    h1: int,
    out_bias: str | Path,
    out_curves: str | Path,
    out_local_png: str | Path,
    out_subsets_png: str | Path,
    window: int = 4,
    max_trajectories: int = 64,
    max_tokens: int = 32768,
    chunk: int = 512,
    seed: int = 0,
) -> dict:
    """subset_paths: (H2, selection, rho token) -> subset file."""
    from horizon.score.scorer import Scorer

    horizons = sorted(models)
    eval_ids, sample_kind = _eval_sample(heldout_path, pool_paths, max_trajectories, seed)
    subset_sets = _subset_samples(pool_paths, subset_paths, max_trajectories, seed)
    wanted = set(eval_ids) | {t for ids in subset_sets.values() for t in ids}
    toks = dict(
        iter_token_rows(token_shards, ("input_ids", "roles", "turns"), traj_ids=wanted, limit=max_tokens)
    )
    rows: list[dict] = []
    per_token: dict[int, dict] = {}
    work = len(horizons) * len(eval_ids) + sum(len(v) for v in subset_sets.values())
    progress = Progress("diagnostics", work, "trajectories", logger=log)
    for h in horizons:
        scorer = Scorer(models[h], chunk=chunk)
        per_token[h] = {}
        sets = [(sample_kind, eval_ids), *(subset_sets.items() if h == h1 else ())]
        for set_name, ids in sets:
            for tid in ids:
                step_rows, lp_pos = _curve_rows(scorer, h, set_name, tid, toks[tid], window)
                rows += step_rows
                if set_name == sample_kind:
                    per_token[h][tid] = lp_pos
                progress.update(1)
        del scorer
    progress.close()
    write_table(out_curves, pa.Table.from_pylist(rows))
    bias = _bias(per_token, horizons[-1], sample_kind)
    write_csv(out_bias, bias)
    _plot_local(rows, horizons, window, sample_kind, out_local_png)
    _plot_subsets(rows, subset_sets, h1, toks, window, out_subsets_png)
    return {"bias": bias, "sample": sample_kind, "trajectories": len(eval_ids)}


def _bias(per_token: dict[int, dict], ref_h: int, sample_kind: str) -> list[dict]:
    out = []
    ref = per_token[ref_h]
    for h, trajs in sorted(per_token.items()):
        gaps, within, beyond = [], [], []
        for tid, (lp, pos) in trajs.items():
            g = ref[tid][0] - lp
            gaps.append(g)
            within.append(g[pos < h])
            beyond.append(g[pos >= h])
        g, w, b = (np.concatenate(x) if x else np.zeros(0) for x in (gaps, within, beyond))
        out.append(
            {
                "model": str(ModelName.single(h)),
                "horizon": h,
                "reference": str(ModelName.single(ref_h)),
                "bias": float(g.mean()) if len(g) else float("nan"),
                "bias_within_horizon": float(w.mean()) if len(w) else float("nan"),
                "bias_beyond_horizon": float(b.mean()) if len(b) else float("nan"),
                "n_tokens": int(len(g)),
                "n_beyond": int(len(b)),
                "n_trajectories": len(trajs),
                "sample": sample_kind,
            }
        )
    return out


def _mean_curve(rows: list[dict], key: str = "local_ll") -> tuple[np.ndarray, np.ndarray]:
    by_step: dict[int, list[float]] = {}
    for r in rows:
        by_step.setdefault(r["step"], []).append(r[key])
    steps = np.array(sorted(by_step))
    return steps, np.array([np.mean(by_step[s]) for s in steps])


def _plot_local(rows, horizons, window, sample_kind, out_png) -> None:
    fig, ax = pyplot().subplots(figsize=(7, 4.2), dpi=130)
    for h in horizons:
        sel = [r for r in rows if r["horizon"] == h and r["set"] == sample_kind]
        x, y = _mean_curve(sel)
        ax.plot(x + 1, y, marker="o", ms=3, label=f"single-stage K={h}")
    ax.set_xlabel("decision step (assistant turn)")
    ax.set_ylabel(f"local log-likelihood (moving avg, w={window})")
    n = len({r["traj_id"] for r in rows if r["set"] == sample_kind})
    ax.set_title(f"Local log-likelihood along {sample_kind} trajectories (n={n})", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, out_png)


def _plot_subsets(rows, subset_sets, h1, toks, window, out_png) -> None:
    h2s = sorted({int(k.split("-")[0][1:]) for k in subset_sets})
    fig, axes = pyplot().subplots(
        1, max(1, len(h2s)), figsize=(6 * max(1, len(h2s)), 4.2), dpi=130, squeeze=False
    )
    for ax, h2 in zip(axes[0], h2s):
        for name in sorted(k for k in subset_sets if k.startswith(f"H{h2}-")):
            sel = [r for r in rows if r["set"] == name]
            if sel:
                x, y = _mean_curve(sel)
                ax.plot(
                    x + 1, y, marker="o", ms=3, label=name.split("-", 1)[1] + f" (n={len(subset_sets[name])})"
                )
        # where the window (H1, H2] falls, in decision steps, averaged over the pool
        for pos, style in ((h1, "--"), (h2, ":")):
            steps = [
                np.searchsorted(step_starts(toks[t]["roles"], toks[t]["turns"]), pos)
                for t in subset_sets[f"H{h2}-pool"]
            ]
            if steps:
                ax.axvline(np.mean(steps) + 0.5, color="grey", ls=style, lw=1)
        ax.set_title(f"H1={h1}, H2={h2}: local log-lik. under theta1 (dashed H1, dotted H2)", fontsize=9)
        ax.set_xlabel("decision step")
        ax.set_ylabel(f"local log-likelihood (w={window})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, out_png)
