"""The behaviour, budget, cost and tasks tables against values computed by hand from small inputs."""

import json
import math

import pytest

from horizon.report.tables import TableInputs, write_table

EVAL = {"attempts": 2, "repeats": 2}
REPORT = {
    "rel_k": [1, 2], "fragile_max": 1, "bootstrap": 0, "allow_partial": False,
    "error_signatures": ["(?i)error"],
}  # fmt: skip
TASKS = ["t0", "t1"]


def rec(task, attempt, repeat, success, episodes, signature_at=None, first_complete=3):
    sigs = [] if signature_at is None else [{"pattern": "(?i)error", "episode": signature_at}]
    return {"task": task, "attempt": attempt, "repeat": repeat, "success": success, "episodes": episodes,
            "failure_mode": "none" if success else "tests_failed", "error_signatures": sigs,
            "first_complete_episode": first_complete}  # fmt: skip


def write_run(root, model, per_repeat):
    paths = []
    for r, recs in enumerate(per_repeat):
        p = root / "rollouts" / model / "b" / f"r{r}" / "attempts.jsonl"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("".join(json.dumps(x) + "\n" for x in recs))
        paths.append(str(p))
    return paths


def manifest(root):
    p = root / "tasks.json"
    p.write_text(json.dumps({"tasks": [{"id": t} for t in TASKS]}))
    return {"b": str(p)}


def build(name, root, **kw):
    out = {ext: root / f"{name}.{ext}" for ext in ("md", "csv", "tex")}
    t = write_table(name, out, TableInputs(benches=["b"], eval_cfg=EVAL, report_cfg=REPORT, **kw))
    return t, t.tidy


def test_behaviour_counts_reactive_and_proactive_successes(tmp_path):
    # repeat 0: t0 a0 reactive success (error at episode 1 < first complete 3, 5 episodes), t0 a1 proactive
    # success (4 episodes), t1 fails twice; repeat 1: t1 a0 proactive success (6 episodes), the rest fail
    runs = write_run(
        tmp_path,
        "single-K8",
        [
            [
                rec("t0", 0, 0, True, 5, signature_at=1),
                rec("t0", 1, 0, True, 4),
                rec("t1", 0, 0, False, 9, signature_at=0),
                rec("t1", 1, 0, False, 9),
            ],
            [
                rec("t0", 0, 1, False, 7),
                rec("t0", 1, 1, False, 7, signature_at=5),
                rec("t1", 0, 1, True, 6, signature_at=4),
                rec("t1", 1, 1, False, 2),
            ],
        ],
    )  # fmt: skip  (t1 a0 r1: the signature came after its first complete: proactive)
    _, tidy = build("behaviour", tmp_path, rollouts=runs, manifests=manifest(tmp_path), models=["single-K8"])
    row = tidy[0]
    assert row["success_attempts_mean"] == pytest.approx(1.5)  # 2 and 1
    assert row["reactive_successes_mean"] == pytest.approx(0.5) and row["proactive_successes_mean"] == 1.0
    assert row["reactive_share_mean"] == pytest.approx((1 / 2 + 0 / 1) / 2)
    assert row["episodes_per_success_mean"] == pytest.approx((4.5 + 6) / 2)
    assert row["episodes_per_reactive_success_mean"] == pytest.approx(5.0)  # only repeat 0 has one


def test_tasks_table_sums_successes_over_repeats(tmp_path):
    runs = write_run(tmp_path, "single-K8", [
        [rec("t0", 0, 0, True, 3), rec("t0", 1, 0, True, 3), rec("t1", 0, 0, False, 3), rec("t1", 1, 0, True, 3)],
        [rec("t0", 0, 1, True, 3), rec("t0", 1, 1, False, 3), rec("t1", 0, 1, False, 3), rec("t1", 1, 1, False, 3)],
    ])  # fmt: skip
    t, tidy = build("tasks", tmp_path, rollouts=runs, manifests=manifest(tmp_path), models=["single-K8"])
    assert {r["task"]: (r["successes"], r["attempts"]) for r in tidy} == {"t0": (3, 4), "t1": (1, 4)}
    assert "| t0 | 3 |" in t.markdown() and "| t1 | 1 |" in t.markdown()


def test_budget_puts_equal_sized_subsets_side_by_side(tmp_path):
    def solved(n):  # n successes per repeat: t0 a0 .. in order
        cells = [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)]
        return [[rec(t, a, r, i < n, 3) for i, (t, a) in enumerate(cells)] for r in range(2)]

    runs = []
    for model, n in (("refine-H16-top-50", 3), ("refine-H16-random-50", 2), ("refine-H16-bottom-50", 1),
                     ("refine-H16-all-100", 4)):  # fmt: skip
        runs += write_run(tmp_path, model, solved(n))
    summary = tmp_path / "summary.csv"
    summary.write_text(
        "H2,selection,pct,n,mean_score,mean_length,mean_window_tokens\n"
        "16,top,50,5,-1,20,4\n16,bottom,50,5,-2,20,4\n16,random,50,5,-1.5,20,4\n16,all,100,10,-1.5,20,4\n"
    )
    models = ["refine-H16-top-50", "refine-H16-random-50", "refine-H16-bottom-50", "refine-H16-all-100"]
    t, tidy = build("budget", tmp_path, rollouts=runs, manifests=manifest(tmp_path), models=models,
                    summary=str(summary))  # fmt: skip
    assert {r["selection"]: r["success_attempts_mean"] for r in tidy} == {"top": 3, "random": 2, "bottom": 1}
    assert all(r["n"] == 5 and r["pct"] == "50" for r in tidy)
    md = t.markdown()
    assert "| 16 | 50% | 5 | 3.0 ± 0.0 | 2.0 ± 0.0 | 1.0 ± 0.0 |" in md
    assert "| 16 | all | 10 | 4.0 ± 0.0 |  |  |" in md


def test_cost_adds_the_warm_start_to_two_stage_models(tmp_path):
    hours = {"single-K8": 2.0, "single-K16": 5.0, "refine-H16-top-50": 1.5}
    dirs = []
    for m, h in hours.items():
        d = tmp_path / "models" / m
        d.mkdir(parents=True)
        (d / "timing.json").write_text(json.dumps({
            "wall_hours": h, "tokens_seen": 1000, "supervised_tokens": 400, "tokens_per_s": 10.0,
            "world_size": 8, "device": "cpu",
        }))  # fmt: skip
        dirs.append(str(d))
    _, tidy = build("cost", tmp_path, model_dirs=dirs, h1=8)
    rows = {r["model"]: r for r in tidy}
    assert rows["refine-H16-top-50"]["total_hours"] == pytest.approx(3.5)  # 1.5 + theta1's 2.0
    assert rows["refine-H16-top-50"]["saving_vs_single"] == pytest.approx(1 - 3.5 / 5.0)
    assert rows["single-K16"]["total_hours"] == 5.0 and [r["model"] for r in tidy] == list(hours)


def test_cost_of_a_dmpo_model_adds_its_policy_and_its_preference_data(tmp_path):
    hours = {"single-K8": (2.0, {}), "refine-H16-top-50": (1.5, {}),
             "dmpo-refine-H16-top-50": (0.5, {"preference_hours": 0.25}), "dmpo-base": (0.1, {"preference_hours": 0.2})}  # fmt: skip
    dirs = []
    for m, (h, extra) in hours.items():
        d = tmp_path / "models" / m
        d.mkdir(parents=True)
        (d / "timing.json").write_text(json.dumps({
            "wall_hours": h, "tokens_seen": 1000, "supervised_tokens": 400, "tokens_per_s": 10.0,
            "world_size": 8, "device": "cpu", **extra,
        }))  # fmt: skip
        dirs.append(str(d))
    t, tidy = build("cost", tmp_path, model_dirs=dirs, h1=8)
    rows = {r["model"]: r for r in tidy}
    assert rows["dmpo-refine-H16-top-50"]["total_hours"] == pytest.approx(0.5 + 0.25 + 1.5 + 2.0)
    assert rows["dmpo-base"]["total_hours"] == pytest.approx(0.3)  # the untrained student costs nothing
    assert math.isnan(rows["dmpo-base"]["saving_vs_single"])
    assert "DMPO from two-stage H2=16 top 50%" in t.markdown() and "preference_hours" in t.caption
