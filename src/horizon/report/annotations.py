"""Manual failure classification: export failed attempts for annotators, read their labels back.

The export (results/annotations/<model>-<bench>.csv) has one row per failed attempt (infrastructure
errors excluded): what ended it, the commands of its last episodes, the tail of the last screen, the
transcript's path, and empty `label` and `note` columns. Annotators fill `label` from the configured
label set (config annotate.labels) in a copy under annotate.dir; the labels table reads every
filled file back: per class the labelled attempts and their tasks (the paper's Table 7) and the
pass rate of each compared model on those tasks (Table 9). A label outside the set stops the table
with the file and row; empty labels are counted as not labelled yet, never guessed.
"""

from __future__ import annotations

import csv
import json
import logging
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from horizon.grid import ModelName, order_models, parse_rollout_path
from horizon.io import write_csv, write_text
from horizon.report.metrics import read_attempts
from horizon.report.render import DASH, Table
from horizon.terminus import ParseError, parse_response

log = logging.getLogger("horizon.report.annotations")

EXPORT_COLUMNS = list(
    (
        "model benchmark task attempt repeat failure_mode ended episodes last_commands last_screen"
        " transcript label note"
    ).split()
)
REQUIRED = ["model", "benchmark", "task", "attempt", "repeat", "label"]


class AnnotationError(ValueError):
    """A filled annotation file cannot be read: the message names the file, row and value."""


# ---------------------------------------------------------------------------------------------
# export


def _episodes(messages: list[dict]) -> list[tuple[str, str | None]]:
    """(assistant answer, the user turn that answered it or None) for every episode, in order."""
    out = []
    for i, m in enumerate(messages):
        if m["role"] == "assistant":
            nxt = messages[i + 1]["content"] if i + 1 < len(messages) else None
            out.append((m["content"], nxt))
    return out


def _commands(answer: str) -> str:
    try:
        cmds = parse_response(answer).commands
    except ParseError:
        return "(unparseable answer)"
    return " | ".join(c.keystrokes.rstrip("\n") for c in cmds) or "(no command)"


def transcript_summary(path: str | None, last_episodes: int, screen_tail: int) -> tuple[str, str]:
    """(commands of the last episodes, one line each; the tail of the last screen) from a transcript."""
    if not path or not Path(path).exists():
        return "", ""
    episodes = _episodes(json.loads(Path(path).read_text()).get("messages", []))
    first = len(episodes) - min(last_episodes, len(episodes))
    lines = [f"ep {first + i + 1}: {_commands(answer)}" for i, (answer, _) in enumerate(episodes[first:])]
    screens = [reply for _, reply in episodes if reply is not None]
    return "\n".join(lines), (screens[-1][-screen_tail:] if screens else "")


def export_failures(
    rollouts: Sequence[str], model: str, bench: str, last_episodes: int, screen_tail: int, out: str | Path
) -> list[dict]:
    """Write the failed attempts of one model on one benchmark, with empty labels."""
    rows = []
    for p in rollouts:
        rp = parse_rollout_path(p)
        if (rp.model, rp.bench) != (model, bench):
            raise ValueError(f"{p}: not a rollout of {model} on {bench}")
        for rec in read_attempts(p):
            if rec["success"] or rec.get("failure_mode") in ("infra_error", "unsupported"):
                continue
            commands, screen = transcript_summary(rec.get("transcript"), last_episodes, screen_tail)
            rows.append(
                {
                    "model": model,
                    "benchmark": bench,
                    "task": rec["task"],
                    "attempt": rec["attempt"],
                    "repeat": rec["repeat"],
                    "failure_mode": rec.get("failure_mode", ""),
                    "ended": rec.get("ended", ""),
                    "episodes": rec.get("episodes", ""),
                    "last_commands": commands,
                    "last_screen": screen,
                    "transcript": rec.get("transcript") or "",
                    "label": "",
                    "note": "",
                }
            )
    rows.sort(key=lambda r: (r["task"], r["repeat"], r["attempt"]))
    if rows:
        write_csv(out, rows)
    else:  # a header all the same: a model without failures is an answer, not an error
        write_text(out, ",".join(EXPORT_COLUMNS) + "\n")
    log.info("%s on %s: %d failed attempts exported to %s", model, bench, len(rows), out)
    return rows


# ---------------------------------------------------------------------------------------------
# reading the labels back


def read_labels(path: str | Path, allowed: Sequence[str]) -> tuple[list[dict], int]:
    """(labelled rows, how many rows have no label yet); an unknown label raises naming the line."""
    canon = {a.lower(): a for a in allowed}
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise AnnotationError(
                f"{path}: no column {', '.join(missing)} (an export has {', '.join(REQUIRED)})"
            )
        labelled, unlabelled = [], 0
        for number, row in enumerate(reader, start=2):  # row 1 is the header, as a spreadsheet counts
            where = (
                f"{path} row {number} (task {row['task']}, attempt {row['attempt']}, repeat {row['repeat']})"
            )
            value = (row["label"] or "").strip()
            if not value:
                unlabelled += 1
                continue
            if value.lower() not in canon:
                raise AnnotationError(
                    f"{where}: label {value!r} is not in annotate.labels (allowed: {', '.join(allowed)})"
                )
            try:
                ModelName.parse(row["model"])
            except ValueError as e:
                raise AnnotationError(f"{where}: {e}") from None
            labelled.append({**row, "label": canon[value.lower()]})
    return labelled, unlabelled


def _outcomes(rollouts: Sequence[str]) -> dict[tuple[str, str, str], list[int]]:
    """(model, bench, task) -> [successes, attempts] summed over repeats (infrastructure errors excluded)."""
    out: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for p in rollouts:
        rp = parse_rollout_path(p)
        for rec in read_attempts(p):
            if rec.get("failure_mode") not in ("infra_error", "unsupported"):
                o = out[(rp.model, rp.bench, rec["task"])]
                o[0] += int(bool(rec["success"]))
                o[1] += 1
    return out


def _pass_rate(outcomes, model: str, bench: str, tasks: set[str]) -> tuple[int, int]:
    s = n = 0
    for t in tasks:
        ok, total = outcomes.get((model, bench, t), (0, 0))
        s, n = s + ok, n + total
    return s, n


def labels_table(
    files: Sequence[str | Path], labels: Sequence[dict], compare: Sequence[str], rollouts
) -> Table:
    allowed = [x["name"] for x in labels]
    by_cell: dict[tuple[str, str], list[dict]] = defaultdict(list)
    pending: dict[tuple[str, str], int] = defaultdict(int)
    for f in files:
        rows, unlabelled = read_labels(f, allowed)
        for r in rows:
            by_cell[(r["model"], r["benchmark"])].append(r)
        if unlabelled:
            with open(f, newline="") as fh:
                first = next(csv.DictReader(fh), None)
            if first:
                pending[(first["model"], first["benchmark"])] += unlabelled
    compare = order_models(compare or {m for m, _ in by_cell})
    outcomes = _outcomes(rollouts)
    t = Table(
        "Failure classes",
        "Failed attempts labelled by hand (annotate.labels), per class: labelled attempts, their tasks, and "
        "the pass rate of each model on those tasks (successes / attempts over every repeat, on the same "
        "benchmark). Each block says how many exported failures are not labelled yet; they are left out.",
        ["class", "attempts", "tasks", *[ModelName.parse(m).label for m in compare]],
    )
    for (model, bench), rows in sorted(
        by_cell.items(), key=lambda kv: (ModelName.parse(kv[0][0]).sort_key, kv[0][1])
    ):
        out = []
        for name in allowed:
            mine = [r for r in rows if r["label"] == name]
            if mine:
                out.append(_class_row(t, model, bench, name, mine, compare, outcomes))
        out.append(_class_row(t, model, bench, "all labelled", rows, compare, outcomes))
        heading = f"{ModelName.parse(model).label} on {bench}: {len(rows)} labelled"
        t.block(heading + f", {pending[(model, bench)]} not labelled yet", out)
    for (model, bench), n in pending.items():
        if (model, bench) not in by_cell:
            t.block(f"{ModelName.parse(model).label} on {bench}: 0 labelled, {n} not labelled yet", [])
    return t


def _class_row(t: Table, model, bench, name, rows, compare, outcomes) -> tuple[str, list[str]]:
    tasks = {r["task"] for r in rows}
    cells = [name, str(len(rows)), str(len(tasks))]
    for m in compare:
        s, n = _pass_rate(outcomes, m, bench, tasks)
        cells.append(f"{100 * s / n:.0f}% ({s}/{n})" if n else DASH)
        t.tidy.append(
            {
                "model": model,
                "benchmark": bench,
                "label": name,
                "labelled_attempts": len(rows),
                "tasks": len(tasks),
                "compare_model": m,
                "successes": s,
                "attempts": n,
                "pass_rate": s / n if n else float("nan"),
            }
        )
    return ("", cells)


def write_labels(files, labels, compare, rollouts, outputs) -> Table:
    if not files:
        raise AnnotationError("no filled annotation files (copy results/annotations/*.csv into annotate.dir)")
    t = labels_table(files, labels, compare, rollouts)
    t.write(outputs["md"], outputs["csv"], outputs["tex"])
    return t
