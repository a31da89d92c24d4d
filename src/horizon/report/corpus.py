"""The corpus tables and figure: statistics of every source's corpus, and the teacher comparison.

- `corpus`: per source, what normalize read and kept (completion rate, quarantine reasons), what the
  filters removed, turns and tokens per trajectory, commands (distinct, the most frequent with
  shares), categories (the `source` column: the dataset config or file a row came from), and TOR.
- `teachers`: per source (one teacher each), its training corpus (trajectories, mean turns, mean
  tokens, TOR mean and quartiles) beside its students' success attempts and Rel>=1 per benchmark at
  each compared horizon.
TOR is our reconstruction (horizon.data.quality); every caption says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow.parquet as pq

from horizon.grid import ModelName
from horizon.io import pyplot, read_json, save_figure
from horizon.report.render import DASH, Table, fmt

TOR_NOTE = (
    "TOR (Targeted Observation Ratio) is our reconstruction, not a published formula: the share of "
    "actions (pipelines that do more than read) with an argument that appeared in an earlier screen."
)


@dataclass
class CorpusSource:
    """One source's corpus files (statistics.json of the quality rule, the filters' stats if any,
    a horizons table of its tokenized training corpus, and quality.parquet)."""

    name: str
    statistics: str
    lengths: str
    quality: str | None = None
    train_stats: str | None = None

    def stats(self) -> dict:
        return read_json(self.statistics)

    def filters(self) -> dict | None:
        return read_json(self.train_stats) if self.train_stats else None

    def tokens(self) -> np.ndarray:
        return np.asarray(
            pq.read_table(self.lengths, columns=["n_tokens"]).column("n_tokens"), dtype=np.int64
        )

    def training_quality(self) -> dict[str, np.ndarray]:
        """n_steps and tor of the trajectories that were tokenized (the training corpus)."""
        kept = set(pq.read_table(self.lengths, columns=["traj_id"]).column("traj_id").to_pylist())
        q = pq.read_table(self.quality, columns=["traj_id", "n_steps", "tor"]).to_pylist()
        rows = [r for r in q if r["traj_id"] in kept]
        return {
            "n_steps": np.array([r["n_steps"] for r in rows], dtype=float),
            "tor": np.array([math.nan if r["tor"] is None else r["tor"] for r in rows], dtype=float),
        }


def corpus_sources(names, statistics, lengths, quality=(), train_stats=()) -> list[CorpusSource]:
    """CorpusSource per name from the table rule's aligned input lists (quality, train_stats optional)."""
    n = len(names)
    quality, train_stats = list(quality) or [None] * n, list(train_stats) or [None] * n
    return [CorpusSource(*row) for row in zip(names, statistics, lengths, quality, train_stats)]


def _pct(x: float) -> str:
    return DASH if x is None or math.isnan(x) else f"{100 * x:.1f}%"


def _dist(values: np.ndarray) -> tuple[float, float, float]:
    if not len(values):
        return (math.nan,) * 3
    return float(values.mean()), float(np.median(values)), float(np.percentile(values, 90))


def _corpus_rows(st: dict, filt: dict | None, tokens: np.ndarray) -> list[tuple[str, str]]:
    comp, cmds, tor = st["completion"], st["commands"], st["tor"]
    rows = [
        ("rows read", f"{comp['rows']:,}"),
        ("completed (rate)", f"{comp['completed']:,} ({_pct(comp['rate'])})"),
        ("duplicates", f"{comp['duplicates']:,}"),
        *[(f"quarantined: {k}", f"{v:,}") for k, v in comp["quarantined"].items()],
        *[(f"removed: {k}", f"{v:,}") for k, v in ((filt or {}).get("removed") or {}).items()],
        ("training trajectories", f"{len(tokens):,}"),
        ("turns / trajectory (mean, median, p90)", "{:.1f}, {:.0f}, {:.0f}".format(*_steps(st))),
        ("tokens / trajectory (mean, median, p90)", "{:,.0f}, {:,.0f}, {:,.0f}".format(*_dist(tokens))),
        ("tokens in all", f"{int(tokens.sum()):,}"),
        ("commands (distinct)", f"{cmds['total']:,} ({cmds['distinct']:,})"),
        ("observations / actions", f"{cmds['observations']:,} / {cmds['actions']:,}"),
        ("TOR mean ± sd (median)", f"{fmt(tor['mean'], tor['sd'], 2)} ({_num(tor['p50'])})"),
        ("trajectories without an action", f"{tor['without_action']:,}"),
    ]
    rows += [(f"category: {c}", f"{k:,}") for c, k in st["categories"][:10]]
    return rows


def _steps(st: dict) -> tuple[float, float, float]:
    s = st["steps"]
    return s["mean"], s["median"], s["p90"]


def _num(x: float | None, digits: int = 2) -> str:
    return DASH if x is None or math.isnan(x) else f"{x:.{digits}f}"


def corpus_table(sources: Sequence[CorpusSource], top: int = 20) -> Table:
    names = [s.name for s in sources]
    t = Table(
        "Corpus statistics",
        "Per source: the rows normalize read and kept, what the filters between normalize and tokenize "
        "removed, and the statistics of the normalized corpus (turns = assistant turns; tokens of the "
        "tokenized training corpus; categories = the dataset config or file of each row; commands = programs "
        f"of the parsed keystrokes, shares of all commands). {TOR_NOTE}",
        ["statistic", *names],
    )
    per_source = [_corpus_rows(s.stats(), s.filters(), s.tokens()) for s in sources]
    labels = list(dict.fromkeys(label for rows in per_source for label, _ in rows))
    values = [dict(rows) for rows in per_source]
    t.block("corpus", [("", [lab, *[v.get(lab, DASH) for v in values]]) for lab in labels])
    for name, v in zip(names, values):
        t.tidy += [{"source": name, "statistic": lab, "value": v[lab]} for lab in labels if lab in v]
    tops = [s.stats()["commands"]["top"][:top] for s in sources]
    rows = []
    for rank in range(max((len(x) for x in tops), default=0)):
        cells = [f"{x[rank][0]} ({100 * x[rank][2]:.1f}%)" if rank < len(x) else DASH for x in tops]
        rows.append(("", [str(rank + 1), *cells]))
        for name, x in zip(names, tops):
            if rank < len(x):
                t.tidy.append(
                    {
                        "source": name,
                        "statistic": f"command {rank + 1}",
                        "value": x[rank][0],
                        "count": x[rank][1],
                        "share": x[rank][2],
                    }
                )
    t.block(f"the {top} most frequent commands", rows)
    return t


def student(source: str, primary: str, k: int) -> str:
    """The single-stage model trained on a source's corpus at horizon K (grid names)."""
    return str(ModelName.single(k, None if source == primary else source))


def teachers_table(
    sources: Sequence[CorpusSource],
    cells: Mapping,
    benches: Sequence[str],
    horizons: Sequence[int],
    eval_cfg: Mapping,
) -> Table:
    primary = sources[0].name
    cols = ["teacher", "trajectories", "mean turns", "mean tokens", "TOR mean ± sd", "TOR p25 / p50 / p75"]
    for k in horizons:
        cols += [f"K={k} success attempts", f"K={k} Rel≥1"]
    t = Table(
        "Teachers",
        f"One row per teacher's corpus (the first, {primary}, is the study's corpus): its training corpus "
        "(trajectories tokenized; turns = assistant turns; TOR over those trajectories that have an action) "
        f"and the single-stage students trained on it at each horizon K, mean ± sd over {eval_cfg['repeats']} "
        f"repeats of {eval_cfg['attempts']} attempts per task. {TOR_NOTE}",
        cols,
    )
    corpus = {}
    for s in sources:
        q, tokens = s.training_quality(), s.tokens()
        tor = q["tor"][~np.isnan(q["tor"])]
        quart = np.percentile(tor, [25, 50, 75]) if len(tor) else [math.nan] * 3
        sd = float(tor.std(ddof=1)) if len(tor) > 1 else math.nan
        corpus[s.name] = {
            "trajectories": len(tokens),
            "mean_turns": float(q["n_steps"].mean()) if len(q["n_steps"]) else math.nan,
            "mean_tokens": float(tokens.mean()) if len(tokens) else math.nan,
            "tor_mean": float(tor.mean()) if len(tor) else math.nan,
            "tor_sd": sd,
            "tor_p25": float(quart[0]),
            "tor_p50": float(quart[1]),
            "tor_p75": float(quart[2]),
        }
    for b in benches:
        rows = []
        for s in sources:
            c = corpus[s.name]
            cells_txt = [
                s.name,
                f"{c['trajectories']:,}",
                _num(c["mean_turns"], 1),
                f"{c['mean_tokens']:,.0f}",
                fmt(c["tor_mean"], c["tor_sd"], 2),
                " / ".join(_num(c[f"tor_p{q}"]) for q in (25, 50, 75)),
            ]
            row = {"teacher": s.name, "benchmark": b, **c}
            for k in horizons:
                cell = cells.get((student(s.name, primary, k), b))
                succ = cell.stat("success_attempts") if cell else (math.nan, math.nan)
                rel = cell.stat("rel_ge_1") if cell else (math.nan, math.nan)
                cells_txt += [fmt(*succ), fmt(*rel)]
                row.update(
                    {
                        f"K{k}_model": student(s.name, primary, k),
                        f"K{k}_success_attempts_mean": succ[0],
                        f"K{k}_success_attempts_sd": succ[1],
                        f"K{k}_rel_ge_1_mean": rel[0],
                        f"K{k}_rel_ge_1_sd": rel[1],
                    }
                )
            rows.append(("", cells_txt))
            t.tidy.append(row)
        t.block(b, rows)
    return t


def corpus_figure(sources: Sequence[CorpusSource], out, top: int = 10) -> None:
    """Per source: TOR histogram, turns per trajectory, the most frequent commands."""
    plt = pyplot()
    fig, axes = plt.subplots(len(sources), 3, figsize=(12, 2.8 * len(sources)), dpi=120, squeeze=False)
    for row, s in zip(axes, sources):
        st = s.stats()
        hist = st["tor"]["histogram"]
        width = 1 / len(hist)
        row[0].bar([i * width for i in range(len(hist))], hist, width=width, align="edge", color="tab:green")
        row[0].set_title(f"{s.name}: TOR (our reconstruction), n={st['tor']['trajectories']}", fontsize=8)
        row[0].set_xlim(0, 1)
        steps = {int(k): v for k, v in st["steps"]["histogram"].items()}
        row[1].bar(list(steps), list(steps.values()), color="tab:blue")
        row[1].set_title(f"{s.name}: assistant turns per trajectory", fontsize=8)
        cmds = st["commands"]["top"][:top][::-1]
        row[2].barh([c for c, _, _ in cmds], [100 * share for _, _, share in cmds], color="tab:orange")
        row[2].set_title(f"{s.name}: most frequent commands (% of {st['commands']['total']:,})", fontsize=8)
        row[2].tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    save_figure(fig, out)


def hygiene_note(sources: Sequence[tuple[str, str]]) -> str:
    """The tables' note on how clean the training data was: per source, what decontamination flagged
    and removed per benchmark, and what the LLM judge removed (from corpus/train/stats.json)."""
    notes = []
    for label, path in sources:
        st = read_json(path)
        d, j = st.get("decontamination"), st.get("judge")
        if d:
            per = ", ".join(f"{b}: {k}" for b, k in d["benchmarks"].items())
            removed = st["removed"].get("contaminated", 0)
            off = "" if d["removal"] == "on" else ", decontam.remove: false"
            notes.append(
                f"{label}: {d['flagged']} of {st['rows']} trajectories share a {d['n']}-gram with a "
                f"benchmark task ({per}), {removed} removed{off}"
            )
        if j:
            why = ", ".join(f"{k} {v}" for k, v in j["removed"].items()) or "none"
            notes.append(f"{label}: the LLM judge ({j['model']}, keep >= {j['keep']}) removed {why}")
    return f"Training data: {'; '.join(notes)}." if notes else ""
