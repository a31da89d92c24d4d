"""DMPO's training tasks, kept apart from the benchmarks, and the preference rollouts on them.

The training task set (`dmpo.tasks`, a directory or a hub dataset of TB1/Harbor tasks) is checked
against every evaluated benchmark's manifest: a task with the id of a benchmark task, or with the
same instruction up to white space (sha256 of the instruction with runs of white space made one
space), stops the run naming both. The preference rollouts are the benchmark rollouts' own job
(horizon.eval.rollout.rollout_job: same agent loop, sandboxes, records and transcripts, resumable)
on a round-robin shard of the training tasks, with `dmpo.attempts` attempts per task; their wall
time goes to timing.json for the cost table.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from horizon.eval.tasks.benchmark import Task, load_benchmark, read_manifest
from horizon.io import read_json, write_json

log = logging.getLogger("horizon.dmpo.training_tasks")

ROLLOUT_BENCH = "dmpo-train"  # the benchmark name the preference rollouts run under (seeds, run ids)


def instruction_sha256(text: str) -> str:
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()


def overlaps(tasks: list[Task], benchmarks: Mapping[str, list[Task]]) -> list[str]:
    """One line per training task that is also a task of an evaluated benchmark (by id or by instruction)."""
    out = []
    for bench, btasks in benchmarks.items():
        ids = {t.id for t in btasks}
        by_text = {instruction_sha256(t.instruction): t.id for t in btasks}
        for t in tasks:
            if t.id in ids:
                out.append(f"task {t.id!r} is task {t.id!r} of benchmark {bench!r} (same task id)")
            elif instruction_sha256(t.instruction) in by_text:
                other = by_text[instruction_sha256(t.instruction)]
                out.append(
                    f"task {t.id!r} has the instruction of task {other!r} of benchmark {bench!r} "
                    "(same text up to white space)"
                )
    return out


def training_manifest(
    task_cfg: Mapping, dest: str | Path, out: str | Path, benchmark_manifests: Mapping
) -> dict:
    """Write the training tasks' manifest (as the benchmark rule does), refusing any benchmark task."""
    root = task_cfg.get("path")
    if root is None:  # a hub dataset of task directories, fetched once
        from huggingface_hub import snapshot_download

        root = snapshot_download(
            repo_id=task_cfg["hf"],
            repo_type="dataset",
            revision=task_cfg["revision"],
            local_dir=f"{dest}/tasks",
        )
    tasks, errors = load_benchmark(root, task_cfg["format"], task_cfg.get("tasks"))
    if not tasks:
        raise ValueError(f"dmpo.tasks {root}: no valid task ({len(errors)} malformed: {errors[:3]})")
    clash = overlaps(tasks, {b: read_manifest(p)[0] for b, p in benchmark_manifests.items()})
    if clash:
        raise ValueError(
            f"dmpo.tasks {root}: {len(clash)} training tasks are evaluated tasks, refused: "
            + "; ".join(clash)
            + ". Remove them from the training set (dmpo.tasks.tasks lists the ones to use)."
        )
    manifest = {
        "benchmark": ROLLOUT_BENCH,
        "root": str(Path(root).resolve()),
        "format": task_cfg["format"],
        "tasks": [t.to_dict() for t in tasks],
        "errors": errors,
    }
    write_json(out, manifest)
    log.info(
        "DMPO training tasks: %d from %s (%d malformed, skipped), none in a benchmark",
        len(tasks),
        root,
        len(errors),
    )
    return manifest


def task_set_name(task_cfg: Mapping) -> str:
    return task_cfg.get("path") or task_cfg["hf"]


def _shard_manifest(tasks_json: str | Path, shard: int, shards: int, out: Path) -> Path:
    m = read_json(tasks_json)
    m["tasks"] = m["tasks"][shard::shards]
    write_json(out, m)
    return out


class _WallClock:
    """Wall seconds of every run of a job, kept in a partial file every 30 s so a killed run still counts."""

    def __init__(self, path: Path):
        self.path, self.partial = path, path.with_name(f".{path.name}.partial")
        self.before = read_json(self.partial)["seconds"] if self.partial.exists() else 0.0
        self.t0, self.stop = time.monotonic(), threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True)
        self.thread.start()

    def seconds(self) -> float:
        return self.before + time.monotonic() - self.t0

    def _beat(self) -> None:
        while not self.stop.wait(30):
            write_json(self.partial, {"seconds": self.seconds()})

    def finish(self, **extra) -> None:
        self.stop.set()
        write_json(self.path, {"wall_seconds": self.seconds(), "wall_hours": self.seconds() / 3600, **extra})
        self.partial.unlink(missing_ok=True)


def preference_rollouts(
    policy_dir: str,
    tokenizer_dir: str,
    tasks_json: str,
    template_path: str,
    settings,
    seed: int,
    signatures: list[str],
    policy: str,
    attempts: int,
    shard: int,
    shards: int,
    out_path: str,
    timing_path: str,
):
    """`attempts` attempts of the policy on every task of one shard of the training tasks."""
    from horizon.eval.rollout import rollout_job

    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    manifest = _shard_manifest(tasks_json, shard, shards, out.parent / "tasks.json")
    clock = _WallClock(Path(timing_path))
    records = rollout_job(
        policy_dir,
        tokenizer_dir,
        str(manifest),
        template_path,
        dataclasses.replace(settings, attempts=attempts),
        seed,
        signatures,
        policy,
        f"{ROLLOUT_BENCH}-s{shard}",
        0,
        out_path,
    )
    clock.finish(attempts=len(records), successes=sum(1 for r in records if r.success))
    return records


def rollout_hours(timing_files) -> float:
    return sum(json.loads(Path(f).read_text())["wall_hours"] for f in timing_files)
