"""The annotation round trip: export failed attempts, fill labels, read them back into the labels table."""

import csv
import json

import pytest

from horizon import config as hc
from horizon.report.annotations import AnnotationError, export_failures, read_labels, write_labels
from tests.helpers import REPO

LABELS = hc.load(REPO / "config.yaml")["annotate"]["labels"]
NAMES = [x["name"] for x in LABELS]


def answer(cmds, complete=False):
    body = {"analysis": "a", "plan": "p", "commands": [{"keystrokes": k, "duration": 0.1} for k in cmds],
            "task_complete": complete}  # fmt: skip
    return "<think>\nhm\n</think>\n\n" + json.dumps(body)


def write_attempts(root, model, bench, repeat, outcomes):
    """outcomes: (task, attempt, success, failure_mode); failed attempts get a 3-episode transcript."""
    d = root / "rollouts" / model / bench / f"r{repeat}"
    recs = []
    for task, attempt, success, mode in outcomes:
        tr = d / "transcripts" / task / f"attempt-{attempt}.json"
        tr.parent.mkdir(parents=True, exist_ok=True)
        messages = [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": answer(["ls -la\n"])},
            {"role": "user", "content": "New Terminal Output:\nfile.txt\n"},
            {"role": "assistant", "content": "no json here"},
            {"role": "user", "content": "ERROR: no JSON object"},
            {"role": "assistant", "content": answer(["cat file.txt\n", "wc -l file.txt\n"])},
            {"role": "user", "content": "New Terminal Output:\n" + "x" * 50 + "THE END"},
        ]
        tr.write_text(json.dumps({"messages": messages}))
        recs.append({"task": task, "attempt": attempt, "repeat": repeat, "success": success, "episodes": 3,
                     "failure_mode": mode, "ended": "max_episodes", "transcript": str(tr)})  # fmt: skip
    p = d / "attempts.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return str(p)


def rollouts(root):
    a = "single-K8"
    return [
        write_attempts(root, a, "b", 0, [("t0", 0, False, "tests_failed"), ("t0", 1, True, "none"),
                                         ("t1", 0, False, "max_episodes"), ("t1", 1, False, "infra_error")]),
        write_attempts(root, a, "b", 1, [("t0", 0, False, "tests_failed"), ("t0", 1, False, "agent_timeout"),
                                         ("t1", 0, True, "none"), ("t1", 1, False, "tests_failed")]),
        write_attempts(root, "single-K16", "b", 0, [("t0", 0, True, "none"), ("t0", 1, True, "none"),
                                                    ("t1", 0, False, "tests_failed"), ("t1", 1, True, "none")]),
    ]  # fmt: skip


def export(tmp_path):
    runs = rollouts(tmp_path)
    out = tmp_path / "results" / "annotations" / "single-K8-b.csv"
    export_failures(runs[:2], "single-K8", "b", last_episodes=2, screen_tail=10, out=out)
    return runs, out


def test_export_lists_failed_attempts_with_their_last_commands_and_screen(tmp_path):
    _, out = export(tmp_path)
    rows = list(csv.DictReader(open(out, newline="")))
    # failed and not infrastructure errors: r0 t0 a0, r0 t1 a0, r1 t0 a0, r1 t0 a1, r1 t1 a1
    assert [(r["task"], r["repeat"], r["attempt"]) for r in rows] == [
        ("t0", "0", "0"), ("t0", "1", "0"), ("t0", "1", "1"), ("t1", "0", "0"), ("t1", "1", "1")]  # fmt: skip
    r = rows[0]
    assert r["label"] == "" and r["note"] == "" and r["failure_mode"] == "tests_failed"
    assert r["last_commands"] == "ep 2: (unparseable answer)\nep 3: cat file.txt | wc -l file.txt"
    assert r["last_screen"] == "xxxTHE END" and r["transcript"].endswith("t0/attempt-0.json")


def fill(out, dest, labels):
    """Copy an export into the annotators' folder with these labels (row order), '' = not yet."""
    rows = list(csv.DictReader(open(out, newline="")))
    for r, lab in zip(rows, labels):
        r["label"] = lab
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return dest


def test_a_partly_filled_file_gives_a_table_of_what_is_labelled(tmp_path):
    runs, out = export(tmp_path)
    filled = fill(out, tmp_path / "annotations" / "k8.csv",
                  ["flawed_solution", "Flawed_Solution ", "limit_reached", "", "misread_task"])  # fmt: skip
    rows, pending = read_labels(filled, NAMES)
    assert pending == 1 and [r["label"] for r in rows] == ["flawed_solution", "flawed_solution",
                                                           "limit_reached", "misread_task"]  # fmt: skip
    outs = {e: tmp_path / f"labels.{e}" for e in ("md", "csv", "tex")}
    t = write_labels([filled], LABELS, ["single-K8", "single-K16"], runs, outs)
    tidy = {(r["label"], r["compare_model"]): r for r in t.tidy}
    # flawed_solution: 2 attempts on task t0; K8 solved t0 in 1 of 4 attempts, K16 in 2 of 2
    assert tidy[("flawed_solution", "single-K8")]["labelled_attempts"] == 2
    assert (
        tidy[("flawed_solution", "single-K8")]["successes"],
        tidy[("flawed_solution", "single-K8")]["attempts"],
    ) == (1, 4)
    assert tidy[("flawed_solution", "single-K16")]["pass_rate"] == 1.0
    # misread_task: t1; K8 1 of 3 (the infrastructure error does not count), K16 1 of 2
    assert (
        tidy[("misread_task", "single-K8")]["successes"],
        tidy[("misread_task", "single-K8")]["attempts"],
    ) == (1, 3)
    md = outs["md"].read_text()
    assert "single-stage K=8 on b: 4 labelled, 1 not labelled yet" in md
    assert "| flawed_solution | 2 | 1 | 25% (1/4) | 100% (2/2) |" in md
    assert "| all labelled | 4 | 2 | 29% (2/7) | 75% (3/4) |" in md
    assert "stuck_loop" not in md  # classes nobody used are not rows


def test_an_unknown_label_is_refused_naming_the_file_and_line(tmp_path):
    runs, out = export(tmp_path)
    filled = fill(out, tmp_path / "annotations" / "k8.csv", ["flawed_solution", "", "bad_luck"])
    with pytest.raises(AnnotationError) as e:
        read_labels(filled, NAMES)
    msg = str(e.value)
    assert f"{filled} row 4 (task t0, attempt 1, repeat 1): label 'bad_luck' is not in annotate.labels" in msg
    assert "allowed: misread_task" in msg
    (tmp_path / "annotations" / "broken.csv").write_text("task,attempt\nt0,0\n")
    with pytest.raises(AnnotationError, match="broken.csv: no column model, benchmark, repeat, label"):
        read_labels(tmp_path / "annotations" / "broken.csv", NAMES)


def test_label_set_and_compare_models_are_checked_at_parse_time():
    import yaml

    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    raw["annotate"] = {"compare": ["single-K999"]}
    with pytest.raises(
        hc.ConfigError, match=r"annotate.compare\[0\]: 'single-K999' is not a model of the grid"
    ):
        hc.validate(raw)
    raw["annotate"] = {"labels": [{"name": "a"}, {"name": "a"}]}
    with pytest.raises(hc.ConfigError, match="two labels have the same name"):
        hc.validate(raw)
    raw["annotate"] = {"labels": [{"name": "Not OK"}]}
    with pytest.raises(hc.ConfigError, match=r"annotate.labels\[0\].name"):
        hc.validate(raw)
