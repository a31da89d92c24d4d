"""Collect a corpus by driving a policy through the real harness (the demo's teacher corpus).

Each (task, variant) is one attempt in a fresh sandbox: the scripted teacher (or any backend)
answers, keystrokes go through tmux, the task's tests grade the result. The conversation is
written as one row in the corpus schema of nvidia/Nemotron-Terminal-Corpus (design section 4), so
the demo corpus goes through the same normalize/tokenize stages as the real one.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from horizon.eval.agent import AgentConfig
from horizon.eval.attempt import LiveSandboxes, RunContext, run_attempt
from horizon.eval.prompts import Template
from horizon.eval.sandbox import sweep_run
from horizon.eval.tasks import read_manifest
from horizon.eval.teacher import TeacherBackend, load_plan
from horizon.io import atomic_path

log = logging.getLogger("horizon.eval.collect")


def collect(
    tasks_json: str | Path,
    template_path: str | Path,
    out_path: str | Path,
    variants: int = 4,
    sandbox: str = "local",
    concurrency: int = 2,
    seed: int = 0,
    sandbox_options: dict | None = None,
    date: str = "2026-01-01T00:00:00",
    style: str = "careful",
) -> dict:
    tasks, errors = read_manifest(tasks_json)
    if errors:
        log.warning("%d malformed tasks skipped: %s", len(errors), [e["task"] for e in errors])
    template = Template.load(template_path)
    jobs = [(t, v) for t in tasks for v in range(variants)]
    if sandbox == "local":  # what killed runs left (by their dead pid: never another live job's)
        sweep_run(sandbox, "collect")
    live = LiveSandboxes()

    def one(job):
        task, variant = job
        ctx = RunContext(
            sandbox,
            TeacherBackend(load_plan(task.path), variant, style),
            template,
            AgentConfig(max_episodes=20, context_length=1 << 20),
            [],
            sandbox_options or {},
            "collect",
        )
        return task, variant, run_attempt(task, variant, 0, ctx, seed, live, transcript=None)

    rows, failures = {}, []
    with ThreadPoolExecutor(concurrency) as pool:
        for task, variant, out in pool.map(one, jobs):
            if not out.record.success or out.record.ended != "completed":
                failures.append(f"{task.id} variant {variant}: {out.record.failure_mode}")
            rows[(task.id, variant)] = out
    if failures:
        raise RuntimeError("the teacher failed bundled tasks (a task or plan bug): " + "; ".join(failures))
    return _write(rows, out_path, date, seed, style)


def _write(rows: dict, out_path, date: str, seed: int, style: str = "careful") -> dict:
    # the careful teacher keeps its original names (its corpus is byte-identical to before styles)
    model, run = (
        ("scripted-teacher", "") if style == "careful" else (f"scripted-teacher-{style}", f"/{style}")
    )
    n_tok = []
    with atomic_path(out_path) as tmp, open(tmp, "w") as fh:
        for (task_id, variant), out in sorted(rows.items()):
            msgs = out.messages
            row = {
                "conversations": msgs,
                "agent": "horizon-terminus",
                "model": model,
                "model_provider": "horizon",
                "date": date,
                "task": task_id,
                "episode": f"episode-{out.record.episodes - 1}",
                "run_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"horizon/{seed}/{task_id}/{variant}{run}")),
                "trial_name": f"{task_id}__v{variant}",
                "enable_thinking": True,
            }
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            n_tok.append(sum(len(m["content"]) for m in msgs))
    log.info(
        "collected %d trajectories (%d-%d characters) -> %s", len(rows), min(n_tok), max(n_tok), out_path
    )
    return {"trajectories": len(rows), "chars": [min(n_tok), max(n_tok)], "at": dt.datetime.now().isoformat()}
