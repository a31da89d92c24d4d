"""Collect a corpus by driving a policy through the real harness (the demo's teacher corpus, or a real teacher).

Each (task, variant) is one attempt in a fresh sandbox: the scripted teacher (or any backend)
answers, keystrokes go through tmux, the task's tests grade the result. The conversation is
written as one row in the corpus schema of nvidia/Nemotron-Terminal-Corpus (design section 4), so
the demo corpus goes through the same normalize/tokenize stages as the real one.

`collect_teacher`: a real teacher (eval.llm.ChatBackend: any OpenAI-compatible chat endpoint, or
`vllm serve` of a local model) makes N attempts per task (synthesized ones: horizon.synth). The
successes are the corpus (`corpus.source` points at it), the failures go beside it in the same schema
(`<name>.failures.jsonl`, for DMPO), and `<name>.usage.json` holds the teacher's tokens and cost.
Resumable per attempt: every finished attempt is appended at once to `<name>.partial.jsonl`.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from horizon.eval.agent.loop import AgentConfig
from horizon.eval.agent.prompts import Template
from horizon.eval.attempt import LiveSandboxes, RunContext, run_attempt
from horizon.eval.collect.teacher import TeacherBackend, load_plan
from horizon.eval.sandbox import sweep_run
from horizon.eval.tasks.benchmark import read_manifest
from horizon.io import Journal, atomic_path, write_json

log = logging.getLogger("horizon.eval.collect.corpus")


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
    capture: dict | None = None,
) -> dict:
    """The scripted teacher's variants of every task; `capture`: the terminal's eval.capture settings
    ({"capture": ..., "capture_idle_max_s": ...}; Terminus-2's timing when None)."""
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
            AgentConfig(max_episodes=20, context_length=1 << 20, **(capture or {})),
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


def _row(
    task_id: str, attempt: int, messages: list[dict], episodes: int, model: str, date: str, seed: int
) -> dict:
    """One attempt as a corpus row (the schema of nvidia/Nemotron-Terminal-Corpus)."""
    return {
        "conversations": messages,
        "agent": "horizon-terminus",
        "model": model,
        "model_provider": "horizon",
        "date": date,
        "task": task_id,
        "episode": f"episode-{max(episodes - 1, 0)}",
        "run_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"horizon/{seed}/{task_id}/{attempt}/{model}")),
        "trial_name": f"{task_id}__a{attempt}",
        "enable_thinking": True,
    }


def _usage(records: list[dict], price: dict) -> dict:
    prompt = sum(r["prompt_tokens"] for r in records)
    completion = sum(r["completion_tokens"] for r in records)
    cached = sum(r["cached_tokens"] or 0 for r in records)
    cost = (prompt * price.get("input", 0.0) + completion * price.get("output", 0.0)) / 1e6
    per_task: dict[str, list[int]] = {}
    for r in records:
        per_task.setdefault(r["task"], [0, 0])[0 if r["success"] else 1] += 1
    return {
        "attempts": len(records),
        "successes": sum(r["success"] for r in records),
        "failures": sum(not r["success"] for r in records),
        "unsupported": sum(r["unsupported"] for r in records),
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cached_tokens": cached,
        "model_calls": sum(r["model_calls"] for r in records),
        "cost_usd": round(cost, 6),
        "price_per_million": price,
        "per_task": {t: {"successes": a, "failures": b} for t, (a, b) in sorted(per_task.items())},
    }


def collect_teacher(
    tasks_json,
    template_path,
    out_path,
    backend,
    model: str,
    attempts: int = 4,
    sandbox: str = "local",
    concurrency: int = 2,
    seed: int = 0,
    sandbox_options: dict | None = None,
    agent: AgentConfig | None = None,
    price: dict | None = None,
    date: str = "2026-01-01T00:00:00",
) -> dict:
    """N attempts per task by `backend` through the harness; successes -> out_path, failures beside it."""
    from horizon.eval.models.backends import BackendError
    from horizon.eval.sandbox import SandboxError

    tasks, errors = read_manifest(tasks_json)
    if errors:
        log.warning("%d malformed tasks skipped: %s", len(errors), [e["task"] for e in errors])
    out = Path(out_path)
    journal = Journal(out.with_name(out.stem + ".partial.jsonl"))
    done = {(r["task"], r["attempt"]): r for r in journal.read() if r.get("model") == model}
    jobs = [(t, a) for t in tasks for a in range(attempts) if (t.id, a) not in done]
    log.info(
        "collect: %d tasks x %d attempts by %s (%d done before)",
        len(tasks),
        attempts,
        model,
        len(tasks) * attempts - len(jobs),
    )
    if sandbox == "local":
        sweep_run(sandbox, "collect")
    ctx = RunContext(
        sandbox,
        backend,
        Template.load(template_path),
        agent or AgentConfig(),
        [],
        sandbox_options or {},
        "collect",
    )
    live, failure = LiveSandboxes(), None

    def one(job):
        task, a = job
        o = run_attempt(task, a, 0, ctx, seed + a, live, transcript=None)
        r = o.record
        return {
            "task": task.id,
            "attempt": a,
            "model": model,
            "success": bool(r.success),
            "reward": r.reward,
            "ended": r.ended,
            "failure_mode": r.failure_mode,
            "unsupported": r.failure_mode == "unsupported",
            "prompt_tokens": r.prompt_tokens,
            "completion_tokens": r.completion_tokens,
            "cached_tokens": (r.cache or {}).get("reused_tokens"),
            "model_calls": r.model_calls,
            "row": _row(task.id, a, o.messages, r.episodes, model, date, seed) if o.messages else None,
        }

    with journal, ThreadPoolExecutor(concurrency) as pool:
        for f in [pool.submit(one, j) for j in jobs]:
            try:
                rec = f.result()
            except (BackendError, SandboxError) as e:
                failure = failure or f"{type(e).__name__}: {e}"
                continue
            journal.append([rec])
            done[(rec["task"], rec["attempt"])] = rec
    if failure:
        raise RuntimeError(
            f"collect: {failure}; {len(done)} of {len(tasks) * attempts} attempts are finished "
            f"and kept in {journal.path}: rerun to resume"
        )
    return _write_teacher(done, out, price or {})


def _write_teacher(done: dict, out: Path, price: dict) -> dict:
    records = [done[k] for k in sorted(done)]
    for path, keep in ((out, True), (out.with_name(out.stem + ".failures.jsonl"), False)):
        with atomic_path(path) as tmp, open(tmp, "w") as fh:
            for r in records:
                if r["row"] and r["success"] == keep:
                    fh.write(json.dumps(r["row"], ensure_ascii=False) + "\n")
    usage = _usage(records, price)
    write_json(out.with_name(out.stem + ".usage.json"), usage)
    log.info(
        "collect: %d successes, %d failures of %d attempts; %d + %d tokens, $%.4f",
        usage["successes"],
        usage["failures"],
        usage["attempts"],
        usage["prompt_tokens"],
        usage["completion_tokens"],
        usage["cost_usd"],
    )
    if not usage["successes"]:
        raise RuntimeError(
            f"collect: the teacher solved none of {usage['attempts']} attempts (see {out.stem}.usage.json)"
        )
    return usage


def collect_with_teacher(
    c: dict,
    tasks_json,
    template_path,
    out_path,
    sandbox: str,
    options: dict,
    seed: int,
    log_path=None,
    vllm_command=("vllm", "serve"),
    capture: dict | None = None,
) -> dict:
    """corpus.collect with a `teacher`: its endpoint, or `vllm serve` of its local model for the run."""
    import os

    from horizon.eval.models.backends import ChatBackend, VLLMServer

    t = c["teacher"]
    agent = AgentConfig(
        max_episodes=t["max_episodes"],
        context_length=t["context_length"],
        max_tokens=t["max_tokens"],
        **(capture or {}),
    )

    def run(url: str) -> dict:
        backend = ChatBackend(
            url,
            t["model"],
            t["temperature"],
            t["top_p"],
            os.environ.get(t["api_key_env"]),
            t["max_retries"],
            t["tokenizer"],
            t["timeout_s"],
        )
        try:
            return collect_teacher(
                tasks_json,
                template_path,
                out_path,
                backend,
                t["model"],
                c["variants"],
                sandbox,
                c["concurrency"],
                seed,
                options,
                agent,
                t["price"],
            )
        finally:
            backend.close()

    if t["endpoint"]:
        return run(t["endpoint"])
    log_file = Path(log_path).with_suffix(".vllm.log") if log_path else None
    with VLLMServer(
        t["vllm_model"], t["context_length"], seed, command=vllm_command, name=t["model"], log_path=log_file
    ) as server:
        return run(server.base_url)
