"""Rollout jobs: every attempt of one model on one benchmark for one evaluation repeat.

One attempt = a fresh sandbox with the task's files, the agent loop, the task's tests, teardown.
Each finished attempt is appended at once as one JSON line to attempts.partial.jsonl (flushed and
fsynced; not a Snakemake output, so a killed job keeps it) and its transcript is written next to
it; a rerun skips the attempts already recorded. An infrastructure error (sandbox, tmux, backend)
is retried up to eval.max_infra_retries times and, if it persists, recorded with failure_mode
infra_error (the metrics exclude such attempts; they are never scored as plain failures). When
every attempt is recorded, attempts.jsonl appears atomically, sorted by task and attempt.

SIGTERM/SIGINT stop the job cleanly: running sandboxes are torn down before it exits.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from horizon.agent import AgentConfig, episode_seed, run_agent
from horizon.io import atomic_path, write_json
from horizon.llm import Backend, BackendError
from horizon.progress import Progress
from horizon.prompts import Template
from horizon.sandbox import Sandbox, SandboxError, SandboxSpec, make_sandbox
from horizon.tasks import Grade, Task, grade
from horizon.terminal import TerminalLost

log = logging.getLogger("horizon.rollout")


@dataclass
class RunContext:
    sandbox_kind: str
    backend: Backend
    template: Template
    agent: AgentConfig
    signatures: list[str]
    sandbox_options: dict
    run_id: str = "run"


class Cancelled(Exception):
    pass


class LiveSandboxes:
    """Sandboxes currently up, so that a signal handler can tear them all down."""

    def __init__(self):
        self.lock = threading.Lock()
        self.items: set[Sandbox] = set()
        self.cancelled = threading.Event()

    def add(self, sb: Sandbox) -> None:
        with self.lock:
            if self.cancelled.is_set():
                raise Cancelled()
            self.items.add(sb)

    def discard(self, sb: Sandbox) -> None:
        with self.lock:
            self.items.discard(sb)

    def stop_all(self) -> None:
        self.cancelled.set()
        with self.lock:
            items = list(self.items)
        for sb in items:
            try:
                sb.stop()
            except Exception:  # noqa: BLE001 - teardown must go on
                log.exception("stopping a sandbox failed")


def run_attempt(
    task: Task,
    attempt: int,
    repeat: int,
    ctx: RunContext,
    seed: int,
    live: LiveSandboxes,
    transcript: Path | None,
    keep_messages: bool = False,
) -> dict:
    """One attempt, graded. Raises SandboxError/BackendError/TerminalLost-at-start on infrastructure failure."""
    t0 = time.monotonic()
    spec = SandboxSpec(
        name=f"{task.id}-a{attempt}-r{repeat}",
        workdir_files=Path(task.workdir_files) if task.workdir_files else None,
        image=task.docker_image,
        dockerfile_dir=Path(task.build_context) if task.build_context else None,
        cpus=task.cpus,
        memory_mb=task.memory_mb,
        allow_internet=task.allow_internet,
        labels={
            "horizon.run": ctx.run_id,
            "horizon.task": task.id,
            "horizon.attempt": str(attempt),
            "horizon.repeat": str(repeat),
        },
    )
    sb = make_sandbox(ctx.sandbox_kind, spec, **ctx.sandbox_options)
    live.add(sb)
    try:
        sb.start()
        t_started = time.monotonic()
        res = run_agent(
            sb,
            ctx.backend,
            ctx.template,
            task.instruction,
            task.agent_timeout,
            ctx.agent,
            seed,
            ctx.signatures,
        )
        t_agent = time.monotonic()
        try:
            g = grade(task, sb)
        except SandboxError as e:
            if not sb.alive():
                raise
            g = Grade(False, 0.0, False, {"error": f"the tests could not run: {e}"}, "")  # the agent broke it
        t_graded = time.monotonic()
    finally:
        sb.stop()
        live.discard(sb)
    t_end = time.monotonic()
    if g.success:
        failure = "none"
    elif g.timed_out:
        failure = "test_timeout"
    elif "error" in g.detail:
        failure = "sandbox_exhausted"
    elif res.ended == "completed":
        failure = "tests_failed"
    else:
        failure = res.ended
    record = {
        "task": task.id, "attempt": attempt, "repeat": repeat, "success": g.success, "reward": g.reward,
        "episodes": res.episodes, "prompt_tokens": res.prompt_tokens, "completion_tokens": res.completion_tokens,
        "seconds": round(t_end - t0, 3), "failure_mode": failure, "ended": res.ended,
        "first_complete_episode": res.first_complete_episode, "parse_errors": res.parse_errors,
        "error_signatures": res.error_signatures, "transcript": str(transcript) if transcript else None,
        "timing": {"start": round(t_started - t0, 3), "agent": round(t_agent - t_started, 3),
                   "grade": round(t_graded - t_agent, 3), "teardown": round(t_end - t_graded, 3)},
    }  # fmt: skip
    if transcript:
        write_json(
            transcript,
            {
                **record,
                "instruction": task.instruction,
                "messages": res.messages,
                "events": res.events,
                "grader": {"detail": g.detail, "output": g.output},
            },
        )
    if keep_messages:
        record["messages"] = res.messages
    return record


# infrastructure, not the model: retried, and recorded as infra_error if it persists (a bug in our
# own code is not in this list: it stops the job loudly)
INFRA = (SandboxError, BackendError, TerminalLost)


def run_repeat(
    tasks: list[Task],
    attempts: int,
    repeat: int,
    ctx: RunContext,
    out_path: str | Path,
    seed: int,
    concurrency: int = 1,
    max_infra_retries: int = 2,
    seed_parts: tuple = (),
    on_record: Callable[[dict], None] | None = None,
) -> list[dict]:
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    partial = out_path.with_name(out_path.stem + ".partial.jsonl")
    done: dict[tuple[str, int], dict] = {}
    if partial.exists():
        for line in partial.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                break  # cut by a kill: the attempts after it run again
            done[(rec["task"], rec["attempt"])] = rec
    todo = [(t, a) for t in tasks for a in range(attempts) if (t.id, a) not in done]
    if done:
        log.info("resuming: %d attempts recorded, %d to run", len(done), len(todo))
    live = LiveSandboxes()
    lock = threading.Lock()
    progress = Progress(f"rollout r{repeat}", len(tasks) * attempts, "attempts", logger=log)
    progress.update(len(done))
    stats = {"success": sum(r["success"] for r in done.values())}

    def handler(signum, frame):
        log.warning("signal %d: tearing down %d sandbox(es)", signum, len(live.items))
        live.stop_all()
        raise KeyboardInterrupt

    old = {}
    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGTERM, signal.SIGINT):
            old[s] = signal.signal(s, handler)

    fh = open(partial, "a")

    def one(task: Task, attempt: int) -> None:
        transcript = out_path.parent / "transcripts" / task.id / f"attempt-{attempt}.json"
        seed_a = episode_seed(seed, *seed_parts, repeat, task.id, attempt)
        rec = None
        for tries in range(max_infra_retries + 1):
            if live.cancelled.is_set():
                return
            try:
                rec = run_attempt(task, attempt, repeat, ctx, seed_a, live, transcript)
                break
            except Cancelled:
                return
            except INFRA as e:
                if live.cancelled.is_set():
                    return
                log.warning(
                    "%s attempt %d: infrastructure error (try %d/%d): %s",
                    task.id,
                    attempt,
                    tries + 1,
                    max_infra_retries + 1,
                    e,
                )
                rec = {"task": task.id, "attempt": attempt, "repeat": repeat, "success": False, "reward": 0.0,
                       "episodes": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0,
                       "failure_mode": "infra_error", "ended": "infra_error", "error": repr(e)[:1000],
                       "error_signatures": [], "transcript": None, "infra_tries": tries + 1}  # fmt: skip
        if rec is None:
            return
        with lock:
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
            done[(task.id, attempt)] = rec
            stats["success"] += bool(rec["success"])
            progress.update(1)
            if on_record:
                on_record(rec)

    try:
        if concurrency <= 1:
            for t, a in todo:
                if live.cancelled.is_set():
                    break
                one(t, a)
        else:
            with ThreadPoolExecutor(concurrency) as pool:
                futures = [pool.submit(one, t, a) for t, a in todo]
                for f in futures:
                    f.result()
    except BaseException:
        live.stop_all()
        raise
    finally:
        fh.close()
        for s, h in old.items():
            signal.signal(s, h)
    progress.close()
    missing = [(t.id, a) for t in tasks for a in range(attempts) if (t.id, a) not in done]
    if missing:
        raise RuntimeError(
            f"{len(missing)} attempts were not recorded, e.g. {missing[:3]}; rerun to complete them"
        )
    records = sorted(done.values(), key=lambda r: (r["task"], r["attempt"]))
    with atomic_path(out_path) as tmp:
        tmp.write_text("".join(json.dumps(r) + "\n" for r in records))
    partial.unlink()
    infra = sum(1 for r in records if r["failure_mode"] == "infra_error")
    log.info(
        "repeat %d: %d/%d attempts succeeded (%d infra errors excluded)",
        repeat,
        stats["success"],
        len(records),
        infra,
    )
    return records


# ---------------------------------------------------------------------------------------------
# the rollout job (one Snakemake job = one model x benchmark x repeat)


def make_backend(eval_cfg: dict, model_dir: str, tokenizer_dir: str, seed: int, log_dir: Path | None):
    """(backend, server or None) from the eval config; the caller stops the server."""
    from horizon.llm import CompletionsBackend, TransformersBackend, VLLMServer

    s = eval_cfg["sampling"]
    kind = eval_cfg["backend"]
    if kind == "transformers":
        return TransformersBackend(model_dir, tokenizer_dir, s["temperature"], s["top_p"]), None
    if kind == "openai":
        return CompletionsBackend(
            eval_cfg["endpoint"],
            tokenizer_dir,
            model=eval_cfg.get("endpoint_model") or "horizon",
            temperature=s["temperature"],
            top_p=s["top_p"],
        ), None
    server = VLLMServer(
        model_dir,
        eval_cfg["context_length"],
        seed,
        eval_cfg["vllm_args"],
        command=eval_cfg.get("vllm_command") or ["vllm", "serve"],
        log_path=(log_dir / "vllm.log") if log_dir else None,
    )
    server.start()
    try:
        backend = CompletionsBackend(
            server.base_url, tokenizer_dir, model=server.name, temperature=s["temperature"], top_p=s["top_p"]
        )
    except BaseException:
        server.stop()
        raise
    return backend, server


def rollout_job(
    model_dir: str,
    tokenizer_dir: str,
    tasks_json: str,
    template_path: str,
    eval_cfg: dict,
    seed: int,
    signatures: list[str],
    model: str,
    bench: str,
    repeat: int,
    out_path: str,
) -> list[dict]:
    from horizon.sandbox import toolchain
    from horizon.tasks import read_manifest

    tasks, errors = read_manifest(tasks_json)
    for e in errors:
        log.error("task %s skipped: %s: %s: %s", e["task"], e["file"], e["field"], e["message"])
    template = Template.load(template_path)
    with toolchain.temporary() as tools:
        options = {"toolchain": tools, **(eval_cfg.get("sandbox_options") or {})}
        backend, server = make_backend(eval_cfg, model_dir, tokenizer_dir, seed, Path(out_path).parent)
        try:
            return _run(
                tasks, eval_cfg, backend, template, signatures, options, model, bench, repeat, out_path, seed
            )
        finally:
            if server is not None:
                server.stop()
            backend.close()


def _run(tasks, eval_cfg, backend, template, signatures, options, model, bench, repeat, out_path, seed):
    run_id = f"{model}/{bench}/r{repeat}"
    if eval_cfg["sandbox"] == "docker":
        from horizon.sandbox.docker import sweep

        sweep(run_id)  # containers of this very job left by a killed earlier run
    agent = AgentConfig(
        max_episodes=eval_cfg["max_episodes"], context_length=eval_cfg["context_length"],
        max_tokens=eval_cfg["sampling"]["max_tokens"], agent_timeout=eval_cfg["agent_timeout_s"],
        max_consecutive_parse_errors=eval_cfg["max_consecutive_parse_errors"],
    )  # fmt: skip
    ctx = RunContext(
        eval_cfg["sandbox"],
        backend,
        template,
        agent,
        signatures,
        options,
        run_id=f"{model}/{bench}/r{repeat}",
    )
    return run_repeat(
        tasks,
        eval_cfg["attempts"],
        repeat,
        ctx,
        out_path,
        seed,
        eval_cfg["concurrency"],
        eval_cfg["max_infra_retries"],
        seed_parts=(model, bench),
    )
