"""The corpus and teachers tables and the budget table's TOR columns, against values computed by hand."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from horizon.report.corpus import CorpusSource, corpus_figure
from tests.unit.report.test_tables import build, manifest, rec, write_run


def statistics(tor_mean, steps, top, removed=None):
    return {
        "trajectories": 2,
        "steps": {"mean": sum(steps) / 2, "median": min(steps), "p90": max(steps), "max": max(steps),
                  "histogram": {str(s): 1 for s in steps}},
        "chars": {"total": 100, "mean": 50},
        "commands": {"total": sum(k for _, k, _ in top), "distinct": len(top), "top": top,
                     "observations": 3, "actions": 4, "targeted": 2, "unparsed": 0, "keys": 1},
        "categories": [["skill_based_easy", 2]],
        "tor": {"trajectories": 2, "without_action": 0, "mean": tor_mean, "sd": 0.1, "p10": 0.1, "p25": 0.2,
                "p50": tor_mean, "p75": 0.8, "p90": 0.9, "histogram": [1] + [0] * 18 + [1]},
        "completion": {"rows": 3, "completed": 2, "duplicates": 0, "quarantined": {"not_completed": 1}, "rate": 2 / 3},
    }  # fmt: skip


def source(tmp_path, name, rows, tor_mean, top, train_stats=None):
    """rows: (traj_id, n_steps, tor, n_tokens)."""
    d = tmp_path / name
    d.mkdir()
    (d / "statistics.json").write_text(json.dumps(statistics(tor_mean, [r[1] for r in rows], top)))
    pq.write_table(
        pa.table({"traj_id": [r[0] for r in rows], "n_tokens": [r[3] for r in rows]}), d / "K8.parquet"
    )
    pq.write_table(pa.table({"traj_id": [r[0] for r in rows] + ["gone"], "n_steps": [r[1] for r in rows] + [99],
                             "tor": [r[2] for r in rows] + [0.0]}), d / "quality.parquet")  # fmt: skip
    ts = None
    if train_stats:
        (d / "stats.json").write_text(json.dumps(train_stats))
        ts = str(d / "stats.json")
    return CorpusSource(
        name, str(d / "statistics.json"), str(d / "K8.parquet"), str(d / "quality.parquet"), ts
    )


def test_corpus_table_puts_every_source_side_by_side(tmp_path):
    a = source(tmp_path, "careful", [("a1", 4, 1.0, 100), ("a2", 6, 0.5, 300)], 0.75, [["ls", 6, 0.6], ["cat", 4, 0.4]],
               train_stats={"removed": {"per_task_shortest": 1}})  # fmt: skip
    b = source(tmp_path, "blind", [("b1", 2, 0.0, 50), ("b2", 2, None, 70)], 0.1, [["echo", 3, 1.0]])
    t, tidy = build("corpus", tmp_path, sources=[a, b])
    md = t.markdown()
    assert "| statistic | careful | blind |" in md
    assert "| completed (rate) | 2 (66.7%) | 2 (66.7%) |" in md
    assert "| removed: per_task_shortest | 1 | – |" in md
    assert "| tokens / trajectory (mean, median, p90) | 200, 200, 280 | 60, 60, 68 |" in md
    assert "| TOR mean ± sd (median) | 0.75 ± 0.10 (0.75) | 0.10 ± 0.10 (0.10) |" in md
    assert "| 1 | ls (60.0%) | echo (100.0%) |" in md and "| 2 | cat (40.0%) | – |" in md
    assert "our reconstruction" in t.caption
    assert {"source": "blind", "statistic": "command 1", "value": "echo", "count": 3, "share": 1.0} in tidy
    corpus_figure([a, b], tmp_path / "corpus.png")
    assert (tmp_path / "corpus.png").stat().st_size > 10_000


def test_teachers_table_compares_corpora_and_their_students(tmp_path):
    a = source(tmp_path, "careful", [("a1", 4, 1.0, 100), ("a2", 6, 0.5, 300)], 0.75, [["ls", 1, 1.0]])
    b = source(tmp_path, "blind", [("b1", 2, 0.0, 50), ("b2", 2, None, 70)], 0.1, [["echo", 1, 1.0]])

    def solved(n):
        cells = [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)]
        return [[rec(t, i, r, i < n, 3) for i, (t, _) in enumerate(cells)] for r in range(2)]

    runs = write_run(tmp_path, "single-K8", solved(3)) + write_run(tmp_path, "single-K8@blind", solved(1))
    models = ["single-K8", "single-K8@blind"]
    t, tidy = build("teachers", tmp_path, sources=[a, b], rollouts=runs, manifests=manifest(tmp_path),
                    models=models, source_horizons=[8])  # fmt: skip
    rows = {r["teacher"]: r for r in tidy}
    # the training corpus only (the quality row of a trajectory that was not tokenized is left out)
    assert rows["careful"]["mean_turns"] == 5 and rows["careful"]["mean_tokens"] == 200
    assert rows["careful"]["tor_mean"] == pytest.approx(0.75) and rows["blind"]["tor_mean"] == 0.0
    assert rows["careful"]["K8_success_attempts_mean"] == 3 and rows["blind"]["K8_success_attempts_mean"] == 1
    assert rows["blind"]["K8_model"] == "single-K8@blind" and rows["careful"]["K8_rel_ge_1_mean"] == 2
    md = t.markdown()
    assert "| careful | 2 | 5.0 | 200 | 0.75 ± 0.35 | 0.62 / 0.75 / 0.88 | 3.0 ± 0.0 | 2.0 ± 0.0 |" in md
    assert "| blind | 2 | 2.0 | 60 | 0.00 | 0.00 / 0.00 / 0.00 | 1.0 ± 0.0 | 1.0 ± 0.0 |" in md


def test_budget_shows_tor_selections_beside_likelihood_ones(tmp_path):
    def solved(n):
        cells = [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)]
        return [[rec(t, i, r, i < n, 3) for i, (t, _) in enumerate(cells)] for r in range(2)]

    runs, models = [], []
    for sel, n in (("top", 3), ("random", 2), ("bottom", 1), ("tor-top", 4), ("tor-bottom", 0)):
        models.append(f"refine-H16-{sel}-50")
        runs += write_run(tmp_path, models[-1], solved(n))
    summary = tmp_path / "summary.csv"
    summary.write_text("H2,selection,pct,n,mean_score,mean_length,mean_window_tokens\n" + "".join(
        f"16,{s},50,5,-1,20,4\n" for s in ("top", "bottom", "random", "tor-top", "tor-bottom")))  # fmt: skip
    t, tidy = build("budget", tmp_path, rollouts=runs, manifests=manifest(tmp_path), models=models,
                    summary=str(summary))  # fmt: skip
    md = t.markdown()
    assert "| H2 | kept | n | top | random | bottom | TOR-top | TOR-bottom |" in md
    assert "| 16 | 50% | 5 | 3.0 ± 0.0 | 2.0 ± 0.0 | 1.0 ± 0.0 | 4.0 ± 0.0 | 0.0 ± 0.0 |" in md
    assert "our reconstruction" in t.caption
    assert {r["selection"]: r["success_attempts_mean"] for r in tidy}["tor-top"] == 4


def test_every_table_notes_how_clean_the_training_data_was(tmp_path):
    stats = tmp_path / "stats.json"
    stats.write_text(json.dumps({
        "rows": 48, "kept": 40, "removed": {"judge_below_threshold": 8},
        "decontamination": {"n": 13, "flagged": 48, "removal": "off (decontam.remove: false)",
                            "benchmarks": {"demo": 48}},
        "judge": {"model": "m", "keep": 3.0, "status": {"judged": 48}, "removed": {"judge_below_threshold": 8},
                  "answers_not_a_verdict": 0},
    }))  # fmt: skip
    hours = tmp_path / "models" / "single-K8"
    hours.mkdir(parents=True)
    (hours / "timing.json").write_text(json.dumps({"wall_hours": 1.0, "tokens_seen": 1, "supervised_tokens": 1,
                                                   "tokens_per_s": 1.0, "world_size": 1, "device": "cpu"}))  # fmt: skip
    t, _ = build("cost", tmp_path, model_dirs=[str(hours)], h1=8, hygiene=[("careful", str(stats))])
    assert t.caption.endswith(
        "Training data: careful: 48 of 48 trajectories share a 13-gram with a benchmark task (demo: 48), "
        "0 removed, decontam.remove: false; careful: the LLM judge (m, keep >= 3.0) removed "
        "judge_below_threshold 8."
    )
    assert "Training data" in (tmp_path / "cost.md").read_text()
