"""Figures from the rollouts: pass@k curves, the per-task heatmap, episodes per success."""

from __future__ import annotations

import math
from collections.abc import Sequence

from horizon.grid import ModelName, order_models, parse_rollout_path
from horizon.io import pyplot, save_figure
from horizon.report.metrics import read_attempts
from horizon.report.tables import load_cells


def figure_passk(cells, models, bench, eval_cfg, out) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=130)
    ks = list(range(1, eval_cfg["attempts"] + 1))
    for m in order_models([m for m in models if (m, bench) in cells]):
        c = cells[(m, bench)]
        ax.plot(ks, [c.stat(f"pass_at_{k}")[0] for k in ks], marker="o", ms=3, label=ModelName.parse(m).label)
    ax.set_xticks(ks)
    ax.set_xlabel("k (attempts)")
    ax.set_ylabel("pass@k (unbiased, mean over repeats)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"pass@k on {bench}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    save_figure(fig, out)


def figure_heatmap(cells, models, bench, eval_cfg, out) -> None:
    import numpy as np

    plt = pyplot()
    ms = order_models([m for m in models if (m, bench) in cells])
    tasks = cells[(ms[0], bench)].tasks
    total = eval_cfg["attempts"] * eval_cfg["repeats"]
    z = np.array([[sum(r.per_task[t] for r in cells[(m, bench)].repeats) / total for t in tasks] for m in ms])
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(tasks) + 3), 0.4 * len(ms) + 2), dpi=130)
    im = ax.imshow(z, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(tasks)), tasks, rotation=90, fontsize=7)
    ax.set_yticks(range(len(ms)), [ModelName.parse(m).label for m in ms], fontsize=7)
    fig.colorbar(im, ax=ax, label="success rate over all attempts")
    ax.set_title(f"Per-task success on {bench} ({total} attempts per cell)", fontsize=10)
    save_figure(fig, out)


def figure_episodes(rollouts: Sequence[str], models, out) -> None:
    plt = pyplot()
    eps: dict[str, list[int]] = {}
    for p in rollouts:
        eps.setdefault(parse_rollout_path(p).model, []).extend(
            r["episodes"] for r in read_attempts(p) if r["success"]
        )
    ms = [m for m in order_models(models) if eps.get(m)]
    cols = 4
    rows = max(1, math.ceil(len(ms) / cols))
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.2 * cols, 2.4 * rows), dpi=120, squeeze=False, sharex=True
    )
    hi = max((max(v) for v in eps.values() if v), default=1)
    for ax, m in zip(axes.flat, ms):
        ax.hist(eps[m], bins=range(1, hi + 2), color="tab:blue", edgecolor="white")
        ax.set_title(f"{ModelName.parse(m).label} (n={len(eps[m])})", fontsize=8)
    for ax in list(axes.flat)[len(ms) :]:
        ax.axis("off")
    fig.supxlabel("episodes per successful attempt")
    fig.supylabel("successful attempts")
    if not ms:
        axes.flat[0].text(0.5, 0.5, "no successful attempt", ha="center", va="center")
    fig.tight_layout()
    save_figure(fig, out)


def write_figures(
    rollouts, manifests, models, benches, eval_cfg, report_cfg, passk_out, heatmap_out, episodes_out
) -> None:
    cells = load_cells(rollouts, manifests, eval_cfg, report_cfg, models)
    for bench, passk, heat in zip(benches, passk_out, heatmap_out):
        figure_passk(cells, models, bench, eval_cfg, passk)
        figure_heatmap(cells, models, bench, eval_cfg, heat)
    figure_episodes(rollouts, models, episodes_out)
