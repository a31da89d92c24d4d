"""The training corpus: the normalized trajectories minus what the filters between normalize and
tokenize remove, with every removal counted.

Filters, in this order (each sees what the previous ones kept):

1. removals decided per trajectory by earlier stages (decontamination, the LLM judge): a table of
   (traj_id, reason, detail) each;
2. `corpus.common_tasks` (several sources): only tasks that every source still has after 1;
3. `corpus.per_task: shortest | longest`: one trajectory per task, the one with the fewest (most)
   assistant turns, ties by characters, then traj_id.

Output: train/trajectories.parquet (same schema as trajectories.parquet), train/removed.parquet
(traj_id, task, reason, detail) and train/stats.json, where rows = kept + sum(removed) always
holds. An empty result is an error naming the filters and their counts, never an empty corpus.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from horizon.io import atomic_path, iter_batches, read_json, write_json, write_table

log = logging.getLogger("horizon.data.filters")

REMOVED_SCHEMA = pa.schema(
    [("traj_id", pa.string()), ("task", pa.string()), ("reason", pa.string()), ("detail", pa.string())]
)


class FilterError(ValueError):
    """A filter cannot run on this corpus, or removed everything; the message names source and counts."""


def task_column(path: str | Path, key: str, source: str) -> pa.Table:
    """traj_id and the task id column `key` of a trajectories file (named error if it has none)."""
    names = pq.ParquetFile(path).schema_arrow.names
    if key not in names or key == "conversations":
        allowed = ", ".join(n for n in names if n != "conversations")
        raise FilterError(
            f"config key corpus.task_key: {key!r} is not a trajectory column (allowed: {allowed})"
        )
    t = pq.read_table(path, columns=["traj_id", key])
    return t.rename_columns(["traj_id", "task"]).set_column(1, "task", pc.cast(t.column(key), pa.string()))


def removals(paths: Sequence[str | Path]) -> dict[str, tuple[str, str]]:
    """traj_id -> (reason, detail) from the per-trajectory verdict tables (the first reason wins; rows
    without a reason are kept)."""
    out: dict[str, tuple[str, str]] = {}
    for p in paths:
        for r in pq.read_table(p, columns=["traj_id", "reason", "detail"]).to_pylist():
            if r["reason"]:
                out.setdefault(r["traj_id"], (r["reason"], r["detail"] or ""))
    return out


def hygiene_summary(stage: str, report: Mapping, decontam_remove: bool = True) -> dict:
    """What train/stats.json says of the decontamination and judge stages (their own counts)."""
    if stage == "decontamination":
        return {
            "n": report["n"],
            "fields": report["fields"],
            "corpus_text": report["corpus_text"],
            "flagged": report["flagged"],
            "removal": "on" if decontam_remove else "off (decontam.remove: false)",
            "benchmarks": {b: v["flagged"] for b, v in report["benchmarks"].items()},
        }
    return {k: report[k] for k in ("model", "keep", "status", "removed", "answers_not_a_verdict")}


def common_tasks(tasks_by_source: Mapping[str, set[str]], key: str) -> set[str]:
    """Tasks every source has; named errors for a source without task ids or no common task."""
    for name, tasks in tasks_by_source.items():
        if not tasks:
            raise FilterError(
                f"corpus.common_tasks: source {name!r} has no task ids in column {key!r} "
                "(set corpus.task_key to a column that names tasks, or turn common_tasks off)"
            )
    common = set.intersection(*tasks_by_source.values())
    if not common:
        counts = ", ".join(f"{n}: {len(t)} tasks" for n, t in tasks_by_source.items())
        raise FilterError(f"corpus.common_tasks: the sources have no task in common ({counts})")
    return common


def pick_per_task(meta: pa.Table, mode: str) -> np.ndarray:
    """Boolean mask over `meta` rows (traj_id, task, n_steps, chars): one row per task id.

    Rows without a task id are kept (they cannot be grouped; counted by the caller)."""
    n = meta.num_rows
    keep = np.ones(n, dtype=bool)
    if mode == "all" or n == 0:
        return keep
    sign = 1 if mode == "shortest" else -1
    task = meta.column("task").to_pylist()
    steps = np.asarray(meta.column("n_steps")) * sign
    chars = np.asarray(meta.column("chars")) * sign
    ids = meta.column("traj_id").to_pylist()
    best: dict[str, tuple] = {}
    for i in range(n):
        if task[i] is None:
            continue
        k = (steps[i], chars[i], ids[i], i)
        if task[i] not in best or k < best[task[i]]:
            best[task[i]] = k
    keep[[i for i in range(n) if task[i] is not None]] = False
    keep[[k[3] for k in best.values()]] = True
    return keep


def _surviving_tasks(path: str | Path, key: str, name: str, removal_paths: Sequence[str | Path]) -> set[str]:
    t = task_column(path, key, name)
    gone = removals(removal_paths)
    return {
        task
        for tid, task in zip(t.column("traj_id").to_pylist(), t.column("task").to_pylist())
        if task is not None and tid not in gone
    }


def _metadata(trajectories: str | Path, quality: str | Path, key: str, source: str) -> pa.Table:
    meta = task_column(trajectories, key, source)
    q = pq.read_table(quality, columns=["traj_id", "n_steps", "chars"])
    if q.column("traj_id").to_pylist() != meta.column("traj_id").to_pylist():
        raise FilterError(f"{quality}: not the quality table of {trajectories} (rerun the quality rule)")
    return meta.append_column("n_steps", q.column("n_steps")).append_column("chars", q.column("chars"))


def decide(
    meta: pa.Table,
    verdicts: Mapping[str, tuple[str, str]],
    common: set[str] | None,
    per_task: str,
) -> tuple[np.ndarray, list[dict]]:
    """(keep mask, removed rows) over the corpus metadata, filters applied in order."""
    ids, tasks = meta.column("traj_id").to_pylist(), meta.column("task").to_pylist()
    keep = np.ones(len(ids), dtype=bool)
    removed = []
    for i, tid in enumerate(ids):
        if tid in verdicts:
            keep[i] = False
            removed.append(
                {"traj_id": tid, "task": tasks[i], "reason": verdicts[tid][0], "detail": verdicts[tid][1]}
            )
        elif common is not None and tasks[i] not in common:
            keep[i] = False
            why = "no_task_id" if tasks[i] is None else "not_common_task"
            removed.append({"traj_id": tid, "task": tasks[i], "reason": why, "detail": "corpus.common_tasks"})
    picked = np.zeros(len(ids), dtype=bool)
    picked[keep] = pick_per_task(meta.filter(pa.array(keep)), per_task)
    for i in np.flatnonzero(keep & ~picked):
        removed.append(
            {
                "traj_id": ids[i],
                "task": tasks[i],
                "reason": f"per_task_{per_task}",
                "detail": f"not the {per_task} trajectory of its task",
            }
        )
    return picked, removed


def build_training_corpus(
    source: str,
    trajectories: str | Path,
    quality: str | Path,
    out_dir: str | Path,
    per_task: str = "all",
    task_key: str = "task",
    removal_paths: Sequence[str | Path] = (),
    common_with: Mapping[str, tuple[str | Path, Sequence[str | Path]]] | None = None,
    reports: Mapping[str, str | Path] | None = None,
    decontam_remove: bool = True,
) -> dict:
    """Write out_dir/{trajectories.parquet, removed.parquet, stats.json} for one source.

    common_with: every source (this one included) -> (its trajectories, its removal tables), when
    corpus.common_tasks is on; reports: stage -> its counts (decontamination.json, judge.json)."""
    out_dir = Path(out_dir)
    meta = _metadata(trajectories, quality, task_key, source)
    common = None
    if common_with:
        common = common_tasks(
            {n: _surviving_tasks(p, task_key, n, r) for n, (p, r) in common_with.items()}, task_key
        )
    keep, removed = decide(meta, removals(removal_paths), common, per_task)
    reasons = dict(sorted(Counter(r["reason"] for r in removed).items()))
    stats = {
        "source": source,
        "rows": meta.num_rows,
        "kept": int(keep.sum()),
        "removed": reasons,
        "per_task": per_task,
        "task_key": task_key,
        "without_task_id": int(pc.sum(pc.is_null(meta.column("task"))).as_py() or 0),
        "common_tasks": None if common is None else {"tasks": len(common), "sources": sorted(common_with)},
        **{
            stage: hygiene_summary(stage, read_json(p), decontam_remove)
            for stage, p in (reports or {}).items()
        },
    }
    if stats["rows"] != stats["kept"] + sum(reasons.values()):  # pragma: no cover
        raise RuntimeError("filter accounting does not add up; refusing to write a lossy corpus")
    if not stats["kept"]:
        raise FilterError(
            f"filter_corpus: source {source!r}: no trajectory left for training "
            f"({stats['rows']} trajectories, removed: {reasons})"
        )
    _copy_rows(
        trajectories,
        set(meta.column("traj_id").filter(pa.array(keep)).to_pylist()),
        out_dir / "trajectories.parquet",
    )
    write_table(out_dir / "removed.parquet", pa.Table.from_pylist(removed, schema=REMOVED_SCHEMA))
    write_json(out_dir / "stats.json", stats)
    log.info(
        "training corpus of %s: %d of %d trajectories kept, removed %s",
        source,
        stats["kept"],
        stats["rows"],
        reasons,
    )
    return stats


def _copy_rows(src: str | Path, keep: set[str], out: str | Path, batch_rows: int = 256) -> None:
    """The kept rows of a trajectories file, streamed batch by batch (Arrow-level, no Python rows)."""
    pf = pq.ParquetFile(src)
    value_set = pa.array(sorted(keep), pa.string())
    with atomic_path(out) as tmp:
        writer = pq.ParquetWriter(tmp, pf.schema_arrow, compression="zstd")
        for batch in iter_batches(src, batch_rows=batch_rows):
            mask = pc.is_in(batch.column("traj_id"), value_set=value_set)
            writer.write_table(pa.Table.from_batches([batch]).filter(mask))
        writer.close()
