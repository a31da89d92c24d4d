"""Metrics on hand-computed fixtures, and the tables built from them."""

import itertools
import json
import math

import pytest

from horizon.report.metrics import IncompleteResults, build_cell, pass_at_k, repeat_stats
from horizon.report.render import Table, fmt
from horizon.report.tables import load_cells, paired_markdown, reliability

TASKS = ["t0", "t1", "t2", "t3", "t4", "t5"]
S = [8, 0, 1, 2, 6, 4]  # successes per task, out of 8


def records(successes, attempts=8, repeat=0, infra=()):
    out = []
    for t, s in zip(TASKS, successes):
        for a in range(attempts):
            out.append(
                {
                    "task": t,
                    "attempt": a,
                    "repeat": repeat,
                    "success": a < s,
                    "episodes": 3 + a % 2,
                    "failure_mode": "none" if a < s else "tests_failed",
                    "error_signatures": [],
                    "first_complete_episode": 2,
                }
            )
    for t, a in infra:
        rec = next(r for r in out if r["task"] == t and r["attempt"] == a)
        rec.update(success=False, failure_mode="infra_error")
    return out


def test_hand_computed_reliability():
    st = repeat_stats(records(S), TASKS, 8, [1, 4, 6, 8])
    assert st["success_attempts"] == 21
    assert (st["rel_ge_1"], st["rel_ge_4"], st["rel_ge_6"], st["rel_ge_8"]) == (5, 3, 2, 1)
    assert st["s_plus"] == pytest.approx(4.2) and st["fragile"] == 2
    assert st["pass_at_8"] == pytest.approx(5 / 6) and st["pass_at_1"] == pytest.approx(21 / 48)


def test_pass_at_k_matches_brute_force():
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                outcomes = [1] * c + [0] * (n - c)
                subsets = list(itertools.combinations(range(n), k))
                brute = sum(any(outcomes[i] for i in sub) for sub in subsets) / len(subsets)
                assert pass_at_k(n, c, k) == pytest.approx(brute)


def test_infra_errors_are_excluded_not_failures():
    st = repeat_stats(records(S, infra=[("t1", 0), ("t0", 7)]), TASKS, 8, [1])
    assert st["infra_errors"] == 2 and st["success_attempts"] == 20  # t0's 8th success was an infra error
    assert st.n["t0"] == 7 and st.n["t1"] == 7


def test_a_tampered_attempt_is_a_counted_failure():
    """The agent changed what grades it: a failure in the rates, never excluded like an infra error."""
    recs = records(S)
    rec = next(r for r in recs if r["task"] == "t1" and r["attempt"] == 0)
    rec.update(failure_mode="tampered")
    st = repeat_stats(recs, TASKS, 8, [1])
    assert st["infra_errors"] == 0 and st.n["t1"] == 8 and st["success_attempts"] == 21


def test_reactive_and_proactive():
    recs = records([2, 0, 0, 0, 0, 0])
    recs[0]["error_signatures"] = [{"pattern": "(?i)error", "episode": 0}]  # seen before first complete (2)
    recs[1]["error_signatures"] = [{"pattern": "(?i)error", "episode": 2}]  # after: not reactive
    st = repeat_stats(recs, TASKS, 8, [1], patterns={"(?i)error"})
    assert (st["reactive_successes"], st["proactive_successes"]) == (1, 1)
    assert repeat_stats(recs, TASKS, 8, [1], patterns=set())["reactive_successes"] == 0  # pattern removed


def test_no_solved_task_renders_a_dash():
    st = repeat_stats(records([0] * 6), TASKS, 8, [1])
    assert math.isnan(st["s_plus"]) and fmt(st["s_plus"], float("nan")) == "–"


def write_repeats(tmp_path, model, bench, per_repeat, attempts=8):
    files = {}
    for r, succ in enumerate(per_repeat):
        p = tmp_path / "rollouts" / model / bench / f"r{r}" / "attempts.jsonl"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("".join(json.dumps(x) + "\n" for x in records(succ, attempts, r)))
        files[r] = p
    return files


def test_missing_repeat_or_attempts_is_an_error_naming_them(tmp_path):
    files = write_repeats(tmp_path, "single-K8", "tb", [S])
    with pytest.raises(IncompleteResults, match="single-K8 on tb: repeat r1 is missing"):
        build_cell("single-K8", "tb", files, TASKS, 8, 2, [1])
    short = tmp_path / "short.jsonl"
    short.write_text("".join(json.dumps(x) + "\n" for x in records(S)[:-1]))
    with pytest.raises(IncompleteResults, match="repeat r0, task t5 has 7 of 8 attempts"):
        build_cell("m", "tb", {0: short}, TASKS, 8, 1, [1])
    cell = build_cell("single-K8", "tb", files, TASKS, 8, 2, [1], allow_partial=True)
    assert cell.partial and len(cell.repeats) == 1


def test_mean_and_sample_sd_over_repeats_and_tidy_csv(tmp_path):
    files = write_repeats(tmp_path, "single-K8", "tb", [S, [8, 1, 1, 2, 6, 4]])
    manifest = tmp_path / "tasks.json"
    manifest.write_text(json.dumps({"tasks": [{"id": t} for t in TASKS]}))
    ev = {"attempts": 8, "repeats": 2}
    rep = {
        "error_signatures": [],
        "allow_partial": False,
        "rel_k": [1, 4, 6, 8],
        "fragile_max": 2,
        "bootstrap": 200,
    }
    cells = load_cells([str(p) for p in files.values()], {"tb": str(manifest)}, ev, rep)
    t = reliability(cells, ["single-K8"], ["tb"], ev, rep)
    row = t.tidy[0]
    assert (row["model"], row["benchmark"]) == ("single-K8", "tb")
    assert row["success_attempts_mean"] == 21.5 and row["success_attempts_sd"] == pytest.approx(
        math.sqrt(0.5)
    )
    assert row["rel_ge_1_mean"] == 5.5 and row["n_tasks"] == 6 and row["n_repeats"] == 2
    assert row["success_attempts_ci_lo"] <= 21.5 <= row["success_attempts_ci_hi"]
    md = t.markdown()
    assert "21.5 ± 0.7" in md and "6 tasks × 8 attempts × 2 repeats" in md
    header = t.csv().splitlines()[0].split(",")
    assert header[:4] == ["model", "benchmark", "success_attempts_mean", "success_attempts_sd"]


def test_paired_decomposition_sums_to_the_aggregate(tmp_path):
    a = build_cell("single-K8", "tb", write_repeats(tmp_path, "single-K8", "tb", [S, S]), TASKS, 8, 2, [1])
    b = build_cell(
        "single-K16",
        "tb",
        write_repeats(tmp_path, "single-K16", "tb", [[6, 3, 1, 5, 6, 0], [7, 3, 2, 5, 6, 0]]),
        TASKS,
        8,
        2,
        [1],
    )
    from horizon.report.metrics import paired

    p = paired(a, b)
    assert sum(d for _, d in p["better"]) + sum(d for _, d in p["worse"]) == pytest.approx(p["aggregate"])
    assert p["aggregate"] == pytest.approx(22 - 21) and p["unchanged"] == ["t4"]
    assert "t4" not in [t for t, _ in p["better"] + p["worse"]]  # unchanged: listed as neither
    assert sum(d for _, d in p["better"]) == pytest.approx(6.5) and sum(
        d for _, d in p["worse"]
    ) == pytest.approx(-5.5)
    assert "sum to the change in success attempts: +1.00 (aggregate +1.00)" in paired_markdown(a, b)


def test_latex_tables_compile_with_every_special_character(tmp_path):
    from tests.engine_fixtures import ensure_debian_package
    from tests.helpers import compile_latex

    ensure_debian_package("pdflatex", "texlive-latex-base")
    hostile = "a_b & c 50% #1 $x$ {y} ~z ^w back\\slash × ≥ ± – — … ρ θ s̄+"
    t = Table(f"T {hostile}", f"caption: {hostile}", ["model", "Rel≥1", "s̄+", "n × k"])
    t.block(f"bench_1 {hostile}", [("g", ["single-stage K=8", "5.0 ± 0.5", "–", hostile])])
    r = compile_latex(t.latex(), tmp_path)
    assert r.returncode == 0, r.stdout[-3000:]


def test_unsupported_tasks_are_named_skips_not_zeros(tmp_path):
    """A task the sandbox cannot run leaves the task set (and the CI), and the caption names it; a
    task run with another network than its owner gives is counted under the table."""
    import json

    from horizon.report.metrics import build_cell
    from horizon.report.tables import _rests_on

    net = ["network: none (its owner gives the public network; eval.network = declared)"]
    recs = [{"task": "a", "attempt": i, "success": i == 0, "episodes": 2, "failure_mode": "none" if i == 0 else
             "tests_failed", "deviations": net} for i in range(2)]  # fmt: skip
    recs += [{"task": "b", "attempt": i, "success": False, "episodes": 0, "failure_mode": "unsupported",
              "sandbox": "local", "evidence": "Dockerfile: line 3: RUN: exited 100"} for i in range(2)]  # fmt: skip
    f = tmp_path / "attempts.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    cell = build_cell("m", "bench", {0: f}, ["a", "b"], 2, 1, [1])
    assert cell.tasks == ["a"] and cell.unsupported == {
        "b": "local sandbox: Dockerfile: line 3: RUN: exited 100"
    }
    assert cell.repeats[0]["rel_ge_1"] == 1.0 and cell.repeats[0]["success_attempts"] == 1.0
    assert _rests_on({("m", "bench"): cell}, "bench", {"attempts": 2, "repeats": 1}) == (
        "bench: 1 tasks × 2 attempts × 1 repeats; 1 tasks unsupported by the local sandbox, excluded (named in "
        "the attempt records: b); 1 tasks ran with another network than their owner gives them (eval.network)"
    )


def test_mean_and_sd_leave_out_missing_values_and_need_two_for_an_sd():
    from horizon.report.metrics import mean_sd

    assert mean_sd([2.0, float("nan"), 4.0]) == (3.0, pytest.approx(math.sqrt(2)))  # sample sd, ddof = 1
    mean, sd = mean_sd([5.0, float("nan")])
    assert mean == 5.0 and math.isnan(sd)  # one repeat: a mean, no sd
    assert all(math.isnan(x) for x in mean_sd([float("nan")]) + mean_sd([]))


def test_build_cell_defaults_partial_repeats_and_its_errors(tmp_path):
    from horizon.report.metrics import build_cell

    files = write_repeats(tmp_path, "m", "tb", [[3, 0, 1, 2, 6, 4], S])
    assert build_cell("m", "tb", files, TASKS, 8, 2, [1]).repeats[0]["fragile"] == 2  # 1 <= s <= 2 by default
    cell = build_cell("m", "tb", {1: files[1]}, TASKS, 8, 2, [1], allow_partial=True)  # r0 missing, r1 there
    assert cell.partial and [r["success_attempts"] for r in cell.repeats] == [21.0]
    many = [f"x{i}" for i in range(25)]
    with pytest.raises(IncompleteResults) as e:
        build_cell("m", "tb", {0: files[0]}, TASKS + many, 8, 1, [1])
    lines = str(e.value).splitlines()
    assert lines[0] == "incomplete results (set report.allow_partial: true for a marked partial row):"
    assert lines[1:] == [
        f"  m on tb: repeat r0, task x{i} has 0 of 8 attempts" for i in range(20)
    ]  # 20 named
    with pytest.raises(IncompleteResults, match=r"^m on tb: no repeat at all$"):
        build_cell("m", "tb", {}, TASKS, 8, 2, [1], allow_partial=True)


def test_skip_note_names_sandboxes_first_five_tasks_and_the_same_shell_deviation():
    from horizon.report.metrics import Cell

    why = {
        f"u{i}": f"{'docker' if i % 2 else 'local'} sandbox: apt failed (no sandbox: here)" for i in range(6)
    }
    cell = Cell("m", "b", [], [], 1, unsupported=why, deviations={"tests": {"x", "y"}})
    assert cell.skip_note() == (
        "6 tasks unsupported by the docker, local sandbox, excluded (named in the attempt records: "
        "u0, u1, u2, u3, u4, ...); 2 tasks graded in a fresh shell though they ask for the agent's "
        "(eval.same_shell_tests)"
    )
    five = Cell("m", "b", [], [], 1, unsupported={f"u{i}": "local sandbox: x" for i in range(5)})
    assert five.skip_note().endswith("(named in the attempt records: u0, u1, u2, u3, u4)")


def _bootstrap_by_hand(cell, stat, samples, seed, level):
    """The documented CI, one resample at a time: tasks drawn with replacement (the generator seeded
    with `seed`, as many draws as tasks), the statistic per repeat, averaged over repeats; then the
    percentiles (1 - level) / 2 and (1 + level) / 2."""
    import numpy as np

    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(cell.tasks), size=(samples, len(cell.tasks)))
    values = []
    for draw in idx:
        tasks = [cell.tasks[i] for i in draw]
        values.append(np.mean([stat([r.per_task[t] for t in tasks]) for r in cell.repeats]))
    return tuple(float(x) for x in np.percentile(values, [100 * (1 - level) / 2, 100 * (1 + level) / 2]))


def test_bootstrap_ci_resamples_tasks_and_averages_repeats(tmp_path):
    from horizon.report.metrics import bootstrap_ci

    files = write_repeats(tmp_path, "m", "tb", [S, [7, 1, 1, 2, 3, 4], [8, 0, 0, 5, 6, 1]])
    cell = build_cell("m", "tb", files, TASKS, 8, 3, [1])
    for key, stat in [("success_attempts", sum), ("rel_ge_2", lambda s: sum(x >= 2 for x in s))]:
        for level in (0.95, 0.5):
            got = bootstrap_ci(cell, key, 300, seed=3, level=level)
            assert got == pytest.approx(_bootstrap_by_hand(cell, stat, 300, 3, level))
            assert got == bootstrap_ci(cell, key, 300, seed=3, level=level)  # the same seed, the same CI
    assert bootstrap_ci(cell, "success_attempts", 1, seed=0) == pytest.approx(
        _bootstrap_by_hand(cell, sum, 1, 0, 0.95)
    )  # one resample is still one
    assert all(
        math.isnan(x) for x in bootstrap_ci(cell, "success_attempts", 0, seed=0)
    )  # off: report.bootstrap 0
    with pytest.raises(ValueError, match="^no bootstrap for pass_at_1$"):
        bootstrap_ci(cell, "pass_at_1", 10, seed=0)


def test_paired_lists_the_largest_changes_first_then_by_task(tmp_path):
    from horizon.report.metrics import paired

    order = list(reversed(TASKS))  # the cell's task order is not the names' order
    a = build_cell("a", "tb", write_repeats(tmp_path, "a", "tb", [[4, 4, 4, 4, 4, 4]]), order, 8, 1, [1])
    b = build_cell("b", "tb", write_repeats(tmp_path, "b", "tb", [[6, 5, 6, 2, 3, 2]]), order, 8, 1, [1])
    p = paired(a, b)
    assert p["better"] == [("t0", 2.0), ("t2", 2.0), ("t1", 1.0)]
    assert p["worse"] == [("t3", -2.0), ("t5", -2.0), ("t4", -1.0)] and p["unchanged"] == []


def test_repeat_stats_of_tasks_without_records_episodes_and_summaries():
    """A task with no record counts 0 of 0; an excluded attempt is neither a success nor an attempt in
    the per-success and per-attempt means; pass@k exists for k = 1..attempts, nan where no task has k."""
    recs = [
        {"task": "a", "success": True, "episodes": 3, "summarizations": 2, "failure_mode": "none"},
        {"task": "a", "success": False, "episodes": 5, "failure_mode": "tests_failed"},  # no counter: 0
        {"task": "a", "success": True, "episodes": 9, "summarizations": 7, "failure_mode": "infra_error"},
        {"task": "b", "success": True, "episodes": 4, "summarizations": 1, "failure_mode": "none",
         "error_signatures": [{"pattern": "p", "episode": 0}], "first_complete_episode": 3},
        {"task": "b", "success": True, "episodes": 8, "failure_mode": "unsupported",
         "error_signatures": [{"pattern": "p", "episode": 0}]},
    ]  # fmt: skip
    st = repeat_stats(recs, ["a", "b", "never-ran"], 2, [1])
    assert st.n == {"a": 2, "b": 1, "never-ran": 0} and st.per_task == {"a": 1, "b": 1, "never-ran": 0}
    assert st["episodes_per_success"] == 3.5 and st["episodes_per_reactive_success"] == 4.0
    assert st["summarizations_per_attempt"] == 1.0  # (2 + 0 + 1) / 3 counted attempts
    assert st["infra_errors"] == 2 and st["pass_at_1"] == pytest.approx((1 / 2 + 1) / 2)
    assert st["pass_at_2"] == 1.0  # only a has two counted attempts
    assert sorted(k for k in st.values if k.startswith("pass_at_")) == ["pass_at_1", "pass_at_2"]
    none = repeat_stats([], ["a"], 1, [1])
    assert all(math.isnan(none[k]) for k in ("episodes_per_success", "episodes_per_reactive_success",
                                             "summarizations_per_attempt", "pass_at_1", "s_plus"))  # fmt: skip
    assert (
        repeat_stats(records([3, 0, 1, 2, 6, 4]), TASKS, 8, [1])["fragile"] == 2
    )  # fragile_max 2 by default


def test_a_signature_of_another_pattern_does_not_hide_the_next_one():
    rec = {"error_signatures": [{"pattern": "other", "episode": 0}, {"pattern": "p", "episode": 1}],
           "first_complete_episode": 4}  # fmt: skip
    from horizon.report.metrics import is_reactive

    assert is_reactive(rec, {"p"}) and not is_reactive(rec, {"q"})
    with pytest.raises(ValueError, match=r"^k = 3 > n = 2$"):
        pass_at_k(2, 1, 3)


def test_build_cell_passes_its_settings_and_names_each_skip(tmp_path):
    recs = records([2, 0, 0, 0, 0, 0])
    recs[0]["error_signatures"] = [{"pattern": "p", "episode": 0}]
    for r in recs[8:16]:  # t1 and t2 ran with another network; t3 was unsupported, with nothing said
        r["deviations"] = ["network: none: restricted"]
    recs[16]["deviations"] = ["network: none: restricted"]
    recs = [r for r in recs if r["task"] != "t3"] + [
        {"task": "t3", "success": False, "failure_mode": "unsupported"}
    ]
    f = tmp_path / "attempts.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    cell = build_cell("m", "tb", {0: f}, TASKS, 1, 1, [1], patterns=set())
    assert (cell.model, cell.benchmark, cell.attempts) == ("m", "tb", 1)
    assert cell.repeats[0]["reactive_successes"] == 0  # the configured patterns reach repeat_stats
    assert cell.unsupported == {"t3": "the sandbox: unsupported"} and cell.deviations == {
        "network": {"t1", "t2"}
    }
