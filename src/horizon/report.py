"""Tables (Markdown, tidy CSV, LaTeX/booktabs) and figures from the rollouts and training timings.

Every cell is mean ± sample standard deviation over the evaluation repeats, and every caption says
how many tasks, attempts and repeats it rests on, and how many attempts were infrastructure errors
(excluded, never scored as failures).
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path

from horizon.io import atomic_path, pyplot, save_figure
from horizon.metrics import Cell, bootstrap_ci, build_cell, paired

log = logging.getLogger("horizon.report")

ROLLOUT_PATH = re.compile(r"rollouts/(?P<model>[^/]+)/(?P<bench>[^/]+)/r(?P<repeat>\d+)/attempts\.jsonl$")
MODEL_NAME = re.compile(
    r"^(base|single-K(?P<k>\d+)|refine-H(?P<h2>\d+)-(?P<sel>top|bottom|random|all)-(?P<pct>\d+))$"
)
SEL_ORDER = {"top": 0, "random": 1, "bottom": 2, "all": 3}
DASH = "–"


# ---------------------------------------------------------------------------------------------
# cells


def label(model: str) -> str:
    m = MODEL_NAME.match(model)
    if not m or model == "base":
        return "base (untrained)" if model == "base" else model
    if m.group("k"):
        return f"single-stage K={m.group('k')}"
    sel, pct = m.group("sel"), m.group("pct")
    kept = "all (100%)" if sel == "all" else f"{sel} {pct}%"
    return f"two-stage H2={m.group('h2')} {kept}"


def group_of(model: str) -> str:
    m = MODEL_NAME.match(model)
    if model == "base" or not m:
        return "reference"
    if m.group("k"):
        return "single-stage"
    return f"two-stage, H2={m.group('h2')}"


def order_models(models: Sequence[str]) -> list[str]:
    """Single-stage rows by K, then refinement rows grouped by H2, then rho, then selection."""

    def key(m):
        g = MODEL_NAME.match(m)
        if m == "base" or not g:
            return (0, 0, 0, 0)
        if g.group("k"):
            return (1, int(g.group("k")), 0, 0)
        return (2, int(g.group("h2")), int(g.group("pct")), SEL_ORDER[g.group("sel")])

    return sorted(models, key=key)


def load_cells(
    rollouts: Sequence[str],
    manifests: dict[str, str],
    eval_cfg: dict,
    report_cfg: dict,
    models: Sequence[str] | None = None,
) -> dict[tuple[str, str], Cell]:
    files: dict[tuple[str, str], dict[int, str]] = {}
    for p in rollouts:
        m = ROLLOUT_PATH.search(str(p))
        if not m:
            raise ValueError(f"not a rollout path: {p}")
        files.setdefault((m["model"], m["bench"]), {})[int(m["repeat"])] = str(p)
    tasks = {b: [t["id"] for t in json.loads(Path(f).read_text())["tasks"]] for b, f in manifests.items()}
    patterns = set(report_cfg["error_signatures"])
    cells = {}
    wanted = models or sorted({m for m, _ in files})
    for model in wanted:
        for bench in manifests:
            if (model, bench) not in files and report_cfg["allow_partial"]:
                continue
            cells[(model, bench)] = build_cell(
                model,
                bench,
                files.get((model, bench), {}),
                tasks[bench],
                eval_cfg["attempts"],
                eval_cfg["repeats"],
                report_cfg["rel_k"],
                report_cfg["fragile_max"],
                patterns,
                report_cfg["allow_partial"],
            )
    return cells


# ---------------------------------------------------------------------------------------------
# formatting


def fmt(mean: float, sd: float, digits: int = 1) -> str:
    if mean is None or math.isnan(mean):
        return DASH
    s = f"{mean:.{digits}f}"
    if sd is not None and not math.isnan(sd):
        s += f" ± {sd:.{digits}f}"
    return s


def tex_escape(s: str) -> str:
    return (
        s.replace("\\", r"\textbackslash{}")
        .replace("&", r"\&")
        .replace("%", r"\%")
        .replace("_", r"\_")
        .replace("#", r"\#")
        .replace("±", r"$\pm$")
        .replace("≥", r"$\geq$")
        .replace("–", "--")
        .replace("s̄+", r"$\bar{s}^{+}$")
    )


class Table:
    """A table with blocks (one per benchmark), written as Markdown, tidy CSV and LaTeX."""

    def __init__(self, title: str, caption: str, columns: list[str]):
        self.title, self.caption, self.columns = title, caption, columns
        self.blocks: list[tuple[str, list[tuple[str, list[str]]]]] = []  # (heading, [(group, cells)])
        self.tidy: list[dict] = []

    def block(self, heading: str, rows: list[tuple[str, list[str]]]) -> None:
        self.blocks.append((heading, rows))

    def markdown(self) -> str:
        out = [f"# {self.title}", "", self.caption, ""]
        for heading, rows in self.blocks:
            out += [
                f"## {heading}",
                "",
                "| " + " | ".join(self.columns) + " |",
                "|" + "|".join(["---"] + ["---:"] * (len(self.columns) - 1)) + "|",
            ]
            last = None
            for group, cells in rows:
                if group and group != last and len({g for g, _ in rows}) > 1:
                    out.append(f"| *{group}* |" + " |" * (len(self.columns) - 1))
                last = group
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
        return "\n".join(out)

    def latex(self) -> str:
        spec = "l" + "r" * (len(self.columns) - 1)
        out = [
            r"\begin{table}[t]",
            r"\centering",
            r"\small",
            r"\caption{" + tex_escape(self.caption) + "}",
            r"\begin{tabular}{" + spec + "}",
            r"\toprule",
            " & ".join(tex_escape(c) for c in self.columns) + r" \\",
        ]
        for heading, rows in self.blocks:
            out += [
                r"\midrule",
                r"\multicolumn{" + str(len(self.columns)) + r"}{l}{\textit{" + tex_escape(heading) + r"}} \\",
                r"\midrule",
            ]
            for _, cells in rows:
                out.append(" & ".join(tex_escape(c) for c in cells) + r" \\")
        out += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
        return "\n".join(out)

    def csv(self) -> str:
        buf = io.StringIO()
        if self.tidy:
            keys = list(dict.fromkeys(k for row in self.tidy for k in row))
            w = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
            w.writeheader()
            for row in self.tidy:
                w.writerow(
                    {
                        k: (
                            f"{v:.6g}"
                            if isinstance(v, float) and not math.isnan(v)
                            else ("" if isinstance(v, float) else v)
                        )
                        for k, v in row.items()
                    }
                )
        return buf.getvalue()

    def write(self, md: str | Path, csv_path: str | Path, tex: str | Path) -> None:
        for path, text in ((md, self.markdown()), (csv_path, self.csv()), (tex, self.latex())):
            with atomic_path(path) as tmp:
                tmp.write_text(text)


def _rests_on(cells: dict, bench: str, eval_cfg: dict) -> str:
    any_cell = next(c for (m, b), c in cells.items() if b == bench)
    infra = sum(c.infra_errors for (m, b), c in cells.items() if b == bench)
    return (
        f"{bench}: {len(any_cell.tasks)} tasks × {eval_cfg['attempts']} attempts × {eval_cfg['repeats']} repeats"
        + (f"; {infra} infrastructure-error attempts excluded" if infra else "")
    )


# ---------------------------------------------------------------------------------------------
# tables


def reliability(cells, models, benches, eval_cfg, report_cfg, seed: int = 0) -> Table:
    ks = report_cfg["rel_k"]
    n = eval_cfg["attempts"]
    cols = [
        "model",
        "success attempts",
        "95% CI (tasks)",
        *[f"Rel≥{k}" for k in ks],
        "s̄+",
        f"fragile (1–{report_cfg['fragile_max']})",
    ]
    t = Table(
        "Reliability",
        f"Mean ± sample standard deviation over {eval_cfg['repeats']} evaluation repeats of "
        f"{n} attempts per task. Rel≥k: tasks solved in at least k of {n} attempts; s̄+: mean successes over "
        f"the solved tasks ({DASH} when none); fragile: tasks solved in 1 to {report_cfg['fragile_max']} attempts; "
        f"95% CI: bootstrap over tasks ({report_cfg['bootstrap']} resamples) of the success attempts. "
        "Rows marked * are partial.",
        cols,
    )
    for b in benches:
        rows = []
        for m in order_models([m for m in models if (m, b) in cells]):
            c = cells[(m, b)]
            lo, hi = bootstrap_ci(c, "success_attempts", report_cfg["bootstrap"], seed)
            r1lo, r1hi = bootstrap_ci(c, "rel_ge_1", report_cfg["bootstrap"], seed)
            cells_txt = [
                label(m) + (" *" if c.partial else ""),
                fmt(*c.stat("success_attempts")),
                DASH if math.isnan(lo) else f"[{lo:.1f}, {hi:.1f}]",
                *[fmt(*c.stat(f"rel_ge_{k}")) for k in ks],
                fmt(*c.stat("s_plus"), digits=2),
                fmt(*c.stat("fragile")),
            ]
            rows.append((group_of(m), cells_txt))
            row = {"model": m, "benchmark": b}
            for key in ["success_attempts", *[f"rel_ge_{k}" for k in ks], "s_plus", "fragile"]:
                row[f"{key}_mean"], row[f"{key}_sd"] = c.stat(key)
            row.update(
                {
                    "success_attempts_ci_lo": lo,
                    "success_attempts_ci_hi": hi,
                    "rel_ge_1_ci_lo": r1lo,
                    "rel_ge_1_ci_hi": r1hi,
                    "n_tasks": len(c.tasks),
                    "n_attempts": n,
                    "n_repeats": len(c.repeats),
                    "infra_errors": c.infra_errors,
                    "partial": c.partial,
                }
            )
            t.tidy.append(row)
        t.block(_rests_on(cells, b, eval_cfg), rows)
    return t


def behaviour(cells, models, benches, eval_cfg, report_cfg) -> Table:
    cols = [
        "model",
        "successes",
        "proactive",
        "reactive",
        "reactive share",
        "episodes / success",
        "episodes / reactive success",
    ]
    t = Table(
        "Behaviour",
        f"Mean ± sample sd over {eval_cfg['repeats']} repeats. A success is reactive when an error "
        "signature (report.error_signatures, matched on the terminal output) appeared in an observation before "
        "the agent's first task_complete, proactive otherwise.",
        cols,
    )
    for b in benches:
        rows = []
        for m in order_models([m for m in models if (m, b) in cells]):
            c = cells[(m, b)]
            share = [
                r["reactive_successes"] / r["success_attempts"] if r["success_attempts"] else float("nan")
                for r in c.repeats
            ]
            from horizon.metrics import mean_sd

            rows.append(
                (
                    group_of(m),
                    [
                        label(m),
                        fmt(*c.stat("success_attempts")),
                        fmt(*c.stat("proactive_successes")),
                        fmt(*c.stat("reactive_successes")),
                        fmt(*mean_sd(share), digits=2),
                        fmt(*c.stat("episodes_per_success")),
                        fmt(*c.stat("episodes_per_reactive_success")),
                    ],
                )
            )
            row = {"model": m, "benchmark": b}
            for key in (
                "success_attempts",
                "proactive_successes",
                "reactive_successes",
                "episodes_per_success",
                "episodes_per_reactive_success",
            ):
                row[f"{key}_mean"], row[f"{key}_sd"] = c.stat(key)
            row["reactive_share_mean"], row["reactive_share_sd"] = mean_sd(share)
            t.tidy.append(row)
        t.block(_rests_on(cells, b, eval_cfg), rows)
    return t


def tasks_table(cells, models, benches, eval_cfg) -> Table:
    models = order_models(models)
    cols = ["task", *models]
    t = Table(
        "Per-task successes",
        f"Successes of each model on each task, summed over {eval_cfg['repeats']} repeats "
        f"of {eval_cfg['attempts']} attempts (out of {eval_cfg['repeats'] * eval_cfg['attempts']}).",
        cols,
    )
    for b in benches:
        present = [m for m in models if (m, b) in cells]
        if not present:
            continue
        rows = []
        for task in cells[(present[0], b)].tasks:
            vals = []
            for m in models:
                c = cells.get((m, b))
                if c is None:
                    vals.append(DASH)
                    continue
                tot = sum(r["_per_task"][task] for r in c.repeats)
                vals.append(str(tot))
                t.tidy.append(
                    {
                        "task": task,
                        "model": m,
                        "benchmark": b,
                        "successes": tot,
                        "attempts": sum(r["_n"][task] for r in c.repeats),
                    }
                )
            rows.append(("", [task, *vals]))
        t.block(_rests_on(cells, b, eval_cfg), rows)
    return t


def budget(cells, subsets_summary: str, benches, eval_cfg) -> Table:
    summary = list(csv.DictReader(open(subsets_summary)))
    cols = ["H2", "kept", "n", "top", "random", "bottom"]
    t = Table(
        "Selection at equal budgets",
        "Success attempts (mean ± sd over repeats) of the refinement models trained "
        "on Top, Random and Bottom subsets of the same size (n trajectories) of the (H1, H2] scoring pool; "
        "'all' refines on the whole pool.",
        cols,
    )
    for b in benches:
        rows = []
        keyed = {(int(r["H2"]), r["selection"], int(r["pct"])): r for r in summary}
        for h2, pct in sorted({(h, p) for (h, s, p) in keyed if s != "all"}):
            vals = []
            for sel in ("top", "random", "bottom"):
                c = cells.get((f"refine-H{h2}-{sel}-{pct}", b))
                vals.append(fmt(*c.stat("success_attempts")) if c else DASH)
                if c:
                    mean, sd = c.stat("success_attempts")
                    t.tidy.append(
                        {
                            "benchmark": b,
                            "H2": h2,
                            "pct": pct,
                            "selection": sel,
                            "n": int(keyed[(h2, sel, pct)]["n"]) if (h2, sel, pct) in keyed else None,
                            "success_attempts_mean": mean,
                            "success_attempts_sd": sd,
                        }
                    )
            n = next(
                (keyed[(h2, s, pct)]["n"] for s in ("top", "random", "bottom") if (h2, s, pct) in keyed), DASH
            )
            rows.append((f"H2={h2}", [str(h2), f"{pct}%", str(n), *vals]))
        for (h2, sel, _pct), r in sorted(keyed.items()):
            if sel == "all":
                c = cells.get((f"refine-H{h2}-all-100", b))
                rows.append(
                    (
                        f"H2={h2}",
                        [str(h2), "all", r["n"], fmt(*c.stat("success_attempts")) if c else DASH, "", ""],
                    )
                )
        t.block(_rests_on(cells, b, eval_cfg), rows)
    return t


def cost(model_dirs: Sequence[str], h1: int) -> Table:
    timings = {Path(d).name: json.loads((Path(d) / "timing.json").read_text()) for d in model_dirs}
    theta1 = f"single-K{h1}"
    cols = [
        "model",
        "stage hours",
        "total hours",
        "tokens seen",
        "supervised tokens",
        "tokens/s",
        "GPUs/processes",
        "saving vs single-stage",
    ]
    t = Table(
        "Training cost",
        f"Wall-clock hours. Two-stage total = warm start ({theta1}) + refinement. Saving = "
        "1 - two-stage total / hours of the single-stage model trained at the same horizon (K = H2), "
        "as in the paper's Table 4.",
        cols,
    )
    rows = []
    for m in order_models(list(timings)):
        tm = timings[m]
        g = MODEL_NAME.match(m)
        total = tm["wall_hours"]
        saving = float("nan")
        if g and g.group("h2"):
            total = tm["wall_hours"] + timings.get(theta1, {}).get("wall_hours", float("nan"))
            single = timings.get(f"single-K{g.group('h2')}")
            if single:
                saving = 1 - total / single["wall_hours"]
        rows.append(
            (
                group_of(m),
                [
                    label(m),
                    f"{tm['wall_hours']:.3f}",
                    f"{total:.3f}",
                    f"{tm['tokens_seen']:,}",
                    f"{tm['supervised_tokens']:,}",
                    f"{tm['tokens_per_s']:,.0f}",
                    str(tm["world_size"]),
                    DASH if math.isnan(saving) else f"{100 * saving:.0f}%",
                ],
            )
        )
        t.tidy.append(
            {
                "model": m,
                "stage_hours": tm["wall_hours"],
                "total_hours": total,
                "tokens_seen": tm["tokens_seen"],
                "supervised_tokens": tm["supervised_tokens"],
                "tokens_per_s": tm["tokens_per_s"],
                "world_size": tm["world_size"],
                "device": tm["device"],
                "saving_vs_single": saving,
            }
        )
    t.block("training", rows)
    return t


def paired_markdown(a: Cell, b: Cell) -> str:
    p = paired(a, b)
    lines = [
        f"# Paired per-task comparison: {label(b.model)} vs {label(a.model)} on {a.benchmark}",
        "",
        f"Change in mean successes per task (over {len(a.repeats)} / {len(b.repeats)} repeats of {a.attempts} "
        f"attempts). The per-task changes sum to the change in success attempts: {p['total']:+.2f} "
        f"(aggregate {p['aggregate']:+.2f}).",
        "",
        f"- better on {len(p['better'])} tasks: {sum(d for _, d in p['better']):+.2f}",
        f"- worse on {len(p['worse'])} tasks: {sum(d for _, d in p['worse']):+.2f}",
        f"- unchanged on {len(p['unchanged'])} tasks",
        "",
        "| task | change |",
        "|---|---:|",
    ]
    lines += [f"| {t} | {d:+.2f} |" for t, d in p["better"] + p["worse"]]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# figures


def figure_passk(cells, models, bench, eval_cfg, out) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=130)
    ks = list(range(1, eval_cfg["attempts"] + 1))
    for m in order_models([m for m in models if (m, bench) in cells]):
        c = cells[(m, bench)]
        ax.plot(ks, [c.stat(f"pass_at_{k}")[0] for k in ks], marker="o", ms=3, label=label(m))
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
    z = np.array(
        [[sum(r["_per_task"][t] for r in cells[(m, bench)].repeats) / total for t in tasks] for m in ms]
    )
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(tasks) + 3), 0.4 * len(ms) + 2), dpi=130)
    im = ax.imshow(z, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(tasks)), tasks, rotation=90, fontsize=7)
    ax.set_yticks(range(len(ms)), [label(m) for m in ms], fontsize=7)
    fig.colorbar(im, ax=ax, label="success rate over all attempts")
    ax.set_title(f"Per-task success on {bench} ({total} attempts per cell)", fontsize=10)
    save_figure(fig, out)


def figure_episodes(rollouts: Sequence[str], models, out) -> None:
    plt = pyplot()
    from horizon.metrics import read_attempts

    eps: dict[str, list[int]] = {}
    for p in rollouts:
        m = ROLLOUT_PATH.search(str(p))
        eps.setdefault(m["model"], []).extend(r["episodes"] for r in read_attempts(p) if r["success"])
    ms = [m for m in order_models(models) if eps.get(m)]
    cols = 4
    rows = max(1, math.ceil(len(ms) / cols))
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.2 * cols, 2.4 * rows), dpi=120, squeeze=False, sharex=True
    )
    hi = max((max(v) for v in eps.values() if v), default=1)
    for ax, m in zip(axes.flat, ms):
        ax.hist(eps[m], bins=range(1, hi + 2), color="tab:blue", edgecolor="white")
        ax.set_title(f"{label(m)} (n={len(eps[m])})", fontsize=8)
    for ax in list(axes.flat)[len(ms) :]:
        ax.axis("off")
    fig.supxlabel("episodes per successful attempt")
    fig.supylabel("successful attempts")
    if not ms:
        axes.flat[0].text(0.5, 0.5, "no successful attempt", ha="center", va="center")
    fig.tight_layout()
    save_figure(fig, out)


# ---------------------------------------------------------------------------------------------
# entry points of the report rules


def write_table(
    name: str,
    outputs: dict,
    rollouts: Sequence[str] = (),
    manifests: dict[str, str] | None = None,
    models: Sequence[str] = (),
    benches: Sequence[str] = (),
    eval_cfg: dict | None = None,
    report_cfg: dict | None = None,
    seed: int = 0,
    summary: str | None = None,
    model_dirs: Sequence[str] = (),
    h1: int = 0,
) -> Table:
    """Build table `name` and write its md/csv/tex (outputs: md, csv, tex paths)."""
    if name == "cost":
        t = cost(model_dirs, h1)
    else:
        cells = load_cells(rollouts, manifests, eval_cfg, report_cfg, models)
        if name == "reliability":
            t = reliability(cells, models, benches, eval_cfg, report_cfg, seed=seed)
        elif name == "behaviour":
            t = behaviour(cells, models, benches, eval_cfg, report_cfg)
        elif name == "tasks":
            t = tasks_table(cells, models, benches, eval_cfg)
        elif name == "budget":
            t = budget(cells, summary, benches, eval_cfg)
        else:
            raise ValueError(f"unknown table {name!r}")
    t.write(outputs["md"], outputs["csv"], outputs["tex"])
    return t


def write_figures(
    rollouts, manifests, models, benches, eval_cfg, report_cfg, passk_out, heatmap_out, episodes_out
) -> None:
    cells = load_cells(rollouts, manifests, eval_cfg, report_cfg, models)
    for bench, passk, heat in zip(benches, passk_out, heatmap_out):
        figure_passk(cells, models, bench, eval_cfg, passk)
        figure_heatmap(cells, models, bench, eval_cfg, heat)
    figure_episodes(rollouts, models, episodes_out)


def write_paired(rollouts, manifests, a: str, b: str, benches, eval_cfg, report_cfg, out) -> None:
    cells = load_cells(rollouts, manifests, eval_cfg, report_cfg, [a, b])
    with atomic_path(out) as tmp:
        tmp.write_text("\n".join(paired_markdown(cells[(a, bench)], cells[(b, bench)]) for bench in benches))
