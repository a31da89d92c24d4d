"""The paper's layouts (main, benchmarks, episodes, cancellation) against attempts counted by hand."""

import json

import pytest

from horizon.report.tables import TableInputs, write_cancellation, write_table

EVAL = {"attempts": 2, "repeats": 2}
REPORT = {"rel_k": [2], "fragile_max": 1, "bootstrap": 0, "allow_partial": False, "error_signatures": []}
TASKS = ["t0", "t1", "t2", "t3"]


def rec(task, attempt, repeat, success, episodes=3, infra=False):
    return {"task": task, "attempt": attempt, "repeat": repeat, "success": success and not infra,
            "episodes": episodes, "failure_mode": "infra_error" if infra else ("none" if success else "tests_failed"),
            "error_signatures": [], "first_complete_episode": 1}  # fmt: skip


def write_model(root, model, bench, successes, episodes=None):
    """successes[repeat][task] = how many of the 2 attempts succeed (attempt 0 first)."""
    paths = []
    for r, per_task in enumerate(successes):
        recs = [rec(t, a, r, a < per_task[i], (episodes or {}).get((t, a, r), 3))
                for i, t in enumerate(TASKS) for a in range(2)]  # fmt: skip
        p = root / "rollouts" / model / bench / f"r{r}" / "attempts.jsonl"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("".join(json.dumps(x) + "\n" for x in recs))
        paths.append(str(p))
    return paths


def manifests(root, benches=("b",)):
    out = {}
    for b in benches:
        p = root / f"{b}.json"
        p.write_text(json.dumps({"tasks": [{"id": t} for t in TASKS]}))
        out[b] = str(p)
    return out


def outputs(root, name):
    return {ext: root / f"{name}.{ext}" for ext in ("md", "csv", "tex")}


def test_cancellation_counts_tasks_and_attempts_gained_and_lost(tmp_path):
    # a: t0 2+1 = 3, t1 0, t2 1+1 = 2, t3 0 (5 successes); b: t0 1+1 = 2, t1 1+2 = 3, t2 2, t3 0 (7)
    runs = write_model(tmp_path, "single-K8", "b", [[2, 0, 1, 0], [1, 0, 1, 0]])
    runs += write_model(tmp_path, "single-K16", "b", [[1, 1, 1, 0], [1, 2, 1, 0]])
    t = write_cancellation(runs, manifests(tmp_path), "single-K8", "single-K16", ["b"], EVAL, REPORT,
                           outputs(tmp_path, "cancellation"))  # fmt: skip
    row = t.tidy[0]
    # by hand: either solved t0, t1, t2 (t3 by neither); better t1 (+3), worse t0 (-1), unchanged t2
    assert (row["either_solved"], row["better"], row["worse"], row["unchanged"]) == (3, 1, 1, 1)
    assert (row["gained"], row["lost"], row["net"]) == (3, 1, 2)
    assert row["b_successes"] - row["a_successes"] == row["net"]  # net = change in success attempts
    md = (tmp_path / "cancellation.md").read_text()
    assert "| b | 4 | 3 | 1 | 1 | 1 | +3/−1 | +2 |" in md
    assert "+3/-1" in (tmp_path / "cancellation.tex").read_text()  # the minus sign in LaTeX


def test_episodes_are_per_task_means_over_every_attempt_excluding_infra_errors(tmp_path):
    eps = {("t0", 0, 0): 2, ("t0", 1, 0): 4, ("t0", 0, 1): 6, ("t0", 1, 1): 8, ("t1", 0, 0): 10}
    runs = write_model(tmp_path, "single-K8", "b", [[1, 0, 0, 0], [2, 0, 0, 0]], eps)
    # t1 attempt 0 of repeat 0 becomes an infrastructure error (50 episodes): it does not count
    lines = [json.loads(x) for x in open(runs[0])]
    lines[2] = rec("t1", 0, 0, False, 50, infra=True)
    open(runs[0], "w").write("".join(json.dumps(x) + "\n" for x in lines))
    t = write_table("episodes", outputs(tmp_path, "episodes"),
                    TableInputs(rollouts=runs, manifests=manifests(tmp_path), models=["single-K8"], benches=["b"],
                                eval_cfg=EVAL, report_cfg=REPORT))  # fmt: skip
    rows = {r["task"]: r for r in t.tidy}
    assert rows["t0"]["mean_episodes"] == pytest.approx((2 + 4 + 6 + 8) / 4) and rows["t0"]["attempts"] == 4
    assert rows["t1"]["mean_episodes"] == pytest.approx(3.0) and rows["t1"]["attempts"] == 3  # 50 dropped
    md = t.markdown()
    assert "| t0 | 5.0 |" in md and "| t1 | 3.0 |" in md
    every = [2, 4, 6, 8] + [3] * 3 + [3] * 8  # t0, t1 without the infra error, t2 and t3
    assert f"| all tasks | {sum(every) / len(every):.1f} |" in md


def test_benchmarks_and_main_tables(tmp_path):
    runs = write_model(tmp_path, "single-K8", "b", [[2, 0, 1, 0], [1, 0, 1, 0]])
    runs += write_model(tmp_path, "single-K8", "c", [[0, 0, 0, 0], [0, 0, 0, 0]])
    runs += write_model(tmp_path, "refine-H16-top-50", "b", [[2, 2, 0, 0], [2, 1, 0, 1]])
    runs += write_model(tmp_path, "refine-H16-top-50", "c", [[1, 0, 0, 0], [0, 0, 0, 0]])
    dirs = []
    for m, h in (("single-K8", 2.0), ("refine-H16-top-50", 0.5)):
        d = tmp_path / "models" / m
        d.mkdir(parents=True)
        (d / "timing.json").write_text(json.dumps({"wall_hours": h}))
        dirs.append(str(d))
    models = ["single-K8", "refine-H16-top-50"]
    inputs = TableInputs(rollouts=runs, manifests=manifests(tmp_path, ("b", "c")), models=models,
                         benches=["b", "c"], eval_cfg=EVAL, report_cfg=REPORT, model_dirs=dirs, h1=8)  # fmt: skip
    t = write_table("benchmarks", outputs(tmp_path, "benchmarks"), inputs)
    rows = {(r["model"], r["benchmark"]): r for r in t.tidy}
    k8b = rows[("single-K8", "b")]
    # repeats: 3 and 2 successes; Rel>=1 2 and 2 (Rel>=1 although report.rel_k has only 2); s+ 1.5 and 1.0
    assert (k8b["success_attempts_mean"], k8b["rel_ge_1_mean"]) == (2.5, 2.0)
    assert k8b["s_plus_mean"] == pytest.approx(1.25)
    assert rows[("single-K8", "c")]["success_attempts_mean"] == 0
    assert rows[("refine-H16-top-50", "b")]["rel_ge_1_mean"] == pytest.approx(2.5)  # 2 and 3 tasks
    main = write_table("main", outputs(tmp_path, "main"), inputs)
    by_model = {r["model"]: r for r in main.tidy}
    assert by_model["refine-H16-top-50"]["training_hours"] == pytest.approx(2.5)  # 0.5 + warm start 2.0
    assert by_model["single-K8"]["b_rel_ge_1_mean"] == 2.0 and by_model["single-K8"]["c_rel_ge_1_mean"] == 0
    assert (
        "| two-stage H2=16 top 50% | 2.50 | 2.5 ± 0.7 | 4.0 ± 0.0 | 0.5 ± 0.7 | 0.5 ± 0.7 |"
        in main.markdown()
    )


def test_every_new_table_compiles_with_pdflatex(tmp_path):
    from tests.engine_fixtures import ensure_debian_package
    from tests.helpers import compile_latex

    ensure_debian_package("pdflatex", "texlive-latex-base")
    test_benchmarks_and_main_tables(tmp_path)
    test_cancellation_counts_tasks_and_attempts_gained_and_lost(tmp_path / "x")
    for tex in [*tmp_path.glob("*.tex"), *tmp_path.glob("x/*.tex")]:
        r = compile_latex(tex.read_text(), tmp_path)
        assert r.returncode == 0, f"{tex.name}: {r.stdout[-2000:]}"


@pytest.mark.parametrize(
    "pair, message",
    [
        (
            ["single-K16384", "single-K999"],
            "report.paired[0]: 'single-K999' is not a model of the grid (models: base",
        ),
        (["single-K4096", "single-K4096"], "report.paired[0]: compares 'single-K4096' with itself"),
    ],
)
def test_pairs_must_name_two_models_of_the_grid(pair, message):
    import yaml

    from horizon import config as hc
    from tests.helpers import REPO

    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    raw["report"]["paired"] = [pair]
    with pytest.raises(hc.ConfigError) as e:
        hc.validate(raw)
    assert message in str(e.value)
