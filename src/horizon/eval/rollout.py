"""Rollout jobs: every attempt of one model on one benchmark for one evaluation repeat.

Each finished attempt is appended at once as one JSON line to attempts.partial.jsonl (a Journal:
flushed and fsynced; not a Snakemake output, so a killed job keeps it) and its transcript is
written next to it; a rerun skips the attempts already recorded. An infrastructure error
(sandbox, tmux, backend) is retried up to eval.max_infra_retries times and, if it persists,
recorded with failure_mode infra_error (the metrics exclude such attempts; they are never scored
as plain failures). When every attempt is recorded, attempts.jsonl appears atomically, sorted by
task and attempt.

SIGTERM/SIGINT stop the job cleanly: running sandboxes are torn down before it exits.
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from horizon.eval.agent.loop import AgentConfig, episode_seed
from horizon.eval.agent.prompts import Template
from horizon.eval.agent.terminal import TerminalLost
from horizon.eval.attempt import Cancelled, LiveSandboxes, RunContext, run_attempt
from horizon.eval.models.backends import BackendError
from horizon.eval.sandbox import SandboxError, sweep_run
from horizon.eval.settings import Attempt, EvalSettings
from horizon.eval.tasks.benchmark import Task
from horizon.io import Journal, model_stamp, stamp, write_text
from horizon.progress import Progress

log = logging.getLogger("horizon.eval.rollout")

# infrastructure, not the model: retried, and recorded as infra_error if it persists (a bug in our
# own code is not in this list: it stops the job loudly)
INFRA = (SandboxError, BackendError, TerminalLost)


@contextlib.contextmanager
def _teardown_on_signals(live: LiveSandboxes) -> Iterator[None]:
    """SIGTERM/SIGINT (Slurm's time limit, Ctrl-C) tear down every live sandbox, then interrupt the job."""

    def handler(signum, frame):
        log.warning("signal %d: tearing down %d sandbox(es)", signum, len(live.items))
        live.stop_all()
        raise KeyboardInterrupt

    old = {}
    if threading.current_thread() is threading.main_thread():
        old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    except BaseException:
        live.stop_all()
        raise
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class _Repeat:
    """The attempts of one repeat: what is recorded, what is left, and running one with retries."""

    def __init__(
        self,
        tasks,
        attempts,
        repeat,
        ctx,
        out_path,
        seed,
        max_infra_retries,
        seed_parts,
        on_record,
        made_from,
    ):
        self.tasks, self.attempts, self.repeat, self.ctx = tasks, attempts, repeat, ctx
        self.out_path, self.seed, self.retries, self.seed_parts = (
            Path(out_path),
            seed,
            max_infra_retries,
            seed_parts,
        )
        self.on_record = on_record
        self.journal = Journal(self.out_path.with_name(self.out_path.stem + ".partial.jsonl"), made_from)
        # only this run's grid: a journal of more tasks or attempts (the config since narrowed) keeps the rest
        grid = {(t.id, a) for t in tasks for a in range(attempts)}
        self.done: dict[tuple[str, int], Attempt] = {}
        for rec in self.journal.read():
            a = Attempt.from_dict(rec)
            if (a.task, a.attempt) in grid:
                self.done[(a.task, a.attempt)] = a
        self.live = LiveSandboxes()
        self.lock = threading.Lock()
        # tasks this sandbox cannot run (a named skip): their other attempts are recorded without a retry
        self.unsupported = {a.task: a for a in self.done.values() if a.failure_mode == "unsupported"}
        self.progress = Progress(f"rollout r{repeat}", len(tasks) * attempts, "attempts", logger=log)
        self.progress.update(len(self.done))

    def todo(self) -> list[tuple[Task, int]]:
        return [(t, a) for t in self.tasks for a in range(self.attempts) if (t.id, a) not in self.done]

    def _try(self, task: Task, attempt: int) -> Attempt | None:
        transcript = self.out_path.parent / "transcripts" / task.id / f"attempt-{attempt}.json"
        seed = episode_seed(self.seed, *self.seed_parts, self.repeat, task.id, attempt)
        if task.id in self.unsupported:
            known = self.unsupported[task.id]
            return Attempt.unsupported(
                task.id, attempt, self.repeat, known.evidence or "", known.sandbox or "", known.policy
            )
        rec = None
        for tries in range(self.retries + 1):
            if self.live.cancelled.is_set():
                return None
            # in flight until journaled: a killed job's log and journal tell which attempts it was running
            log.info("%s attempt %d: started (try %d)", task.id, attempt, tries + 1)
            try:
                out = run_attempt(task, attempt, self.repeat, self.ctx, seed, self.live, transcript).record
                if out.failure_mode == "unsupported":
                    self.unsupported.setdefault(task.id, out)
                return out
            except Cancelled:
                return None
            except INFRA as e:
                if self.live.cancelled.is_set():
                    return None
                log.warning(
                    "%s attempt %d: infrastructure error (try %d/%d): %s",
                    task.id,
                    attempt,
                    tries + 1,
                    self.retries + 1,
                    e,
                )
                rec = Attempt.infra_error(
                    task.id, attempt, self.repeat, repr(e), tries + 1, getattr(e, "evidence", None)
                )
        return rec

    def one(self, task: Task, attempt: int) -> None:
        rec = self._try(task, attempt)
        if rec is None:
            return
        with self.lock:
            self.journal.append([rec.to_dict()])
            self.done[(task.id, attempt)] = rec
            self.progress.update(1)
            if self.on_record:
                self.on_record(rec)

    def finish(self) -> list[Attempt]:
        """attempts.jsonl, sorted, once every attempt is recorded."""
        self.progress.close()
        missing = [(t.id, a) for t in self.tasks for a in range(self.attempts) if (t.id, a) not in self.done]
        if missing:
            raise RuntimeError(
                f"{len(missing)} attempts were not recorded, e.g. {missing[:3]}; rerun to complete them"
            )
        records = sorted(self.done.values(), key=lambda r: (r.task, r.attempt))
        write_text(self.out_path, "".join(json.dumps(r.to_dict()) + "\n" for r in records))
        self.journal.remove()
        infra = [r for r in records if r.failure_mode == "infra_error"]
        skipped = sorted({r.task for r in records if r.failure_mode == "unsupported"})
        ok = sum(1 for r in records if r.success)
        log.info(
            "repeat %d: %d/%d attempts succeeded; excluded: %d infra errors, %d unsupported attempts (%d tasks)",
            self.repeat,
            ok,
            len(records),
            len(infra),
            sum(1 for r in records if r.failure_mode == "unsupported"),
            len(skipped),
        )
        for r in infra[:5]:  # the evidence of the first few, so that none is excluded unseen
            log.warning("infra error: %s attempt %d: %s [%s]", r.task, r.attempt, r.error, r.evidence)
        for t in skipped[:5]:
            log.warning(
                "unsupported: %s: %s", t, self.unsupported[t].evidence if t in self.unsupported else ""
            )
        return records


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
    on_record: Callable[[Attempt], None] | None = None,
    made_from: dict | None = None,
) -> list[Attempt]:
    """Every attempt of `tasks` for one repeat, resuming from the journal beside `out_path` when it was
    made from the same `made_from` (`rollout_inputs`); attempts.jsonl once all are recorded."""
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    rep = _Repeat(
        tasks, attempts, repeat, ctx, out_path, seed, max_infra_retries, seed_parts, on_record, made_from
    )
    todo = rep.todo()
    if rep.done:
        log.info("resuming: %d attempts recorded, %d to run", len(rep.done), len(todo))
    try:
        with _teardown_on_signals(rep.live):
            if concurrency <= 1:
                for t, a in todo:
                    if rep.live.cancelled.is_set():
                        break
                    rep.one(t, a)
            else:
                with ThreadPoolExecutor(concurrency) as pool:
                    for f in [pool.submit(rep.one, t, a) for t, a in todo]:
                        f.result()
    finally:
        rep.journal.close()
    return rep.finish()


# ---------------------------------------------------------------------------------------------
# the rollout job (one Snakemake job = one model x benchmark x repeat)


def make_backend(settings: EvalSettings, model_dir: str, tokenizer_dir: str, seed: int, log_dir: Path | None):
    """(backend, server or None) from the eval settings; the caller stops the server."""
    from horizon.eval.models.backends import CompletionsBackend, TransformersBackend, VLLMServer

    s = settings.sampling
    if settings.backend == "transformers":
        backend = TransformersBackend(
            model_dir,
            tokenizer_dir,
            s.temperature,
            s.top_p,
            kv_cache=settings.kv_cache,
            batching=settings.batching,
        )
        return backend, None
    if settings.backend == "openai":
        model = settings.endpoint_model or "horizon"
        return CompletionsBackend(settings.endpoint, tokenizer_dir, model, s.temperature, s.top_p), None
    server = VLLMServer(
        model_dir,
        settings.context_length,
        seed,
        settings.vllm_args,
        command=settings.vllm_command,
        log_path=(log_dir / "vllm.log") if log_dir else None,
        prefix_caching=settings.vllm_prefix_caching,
    )
    server.start()
    try:
        backend = CompletionsBackend(server.base_url, tokenizer_dir, server.name, s.temperature, s.top_p)
    except BaseException:
        server.stop()
        raise
    return backend, server


def policy(settings: EvalSettings) -> dict:
    """The safety switches every attempt records (docs/evaluation/tasks.md)."""
    return {"network": settings.network, "same_shell_tests": settings.same_shell_tests}


# settings that change how fast attempts run or how many there are, not what an attempt records: a
# resumed job may change them (more attempts or concurrency, a vLLM flag after an out-of-memory error)
NOT_AN_INPUT = (
    "attempts",
    "repeats",
    "concurrency",
    "max_infra_retries",
    "vllm_command",
    "vllm_args",
    "vllm_prefix_caching",
    "kv_cache",
    "batching",
    "reference_env",
)


def rollout_inputs(
    model_dir: str, tasks_json: str, template_path: str, settings: EvalSettings, seed: int, signatures
) -> dict:
    """What a journaled attempt was made from: another model, task set, template, seed or setting that
    changes an attempt, and the journal is not resumed (horizon.io.Journal)."""
    from dataclasses import asdict

    kept = {k: v for k, v in asdict(settings).items() if k not in NOT_AN_INPUT}
    return {
        "model": model_stamp(model_dir),
        "tasks": stamp(tasks_json),
        "template": stamp(template_path),
        "seed": seed,
        "signatures": list(signatures),
        "settings": kept,
    }


def agent_config(settings: EvalSettings) -> AgentConfig:
    return AgentConfig(
        max_episodes=settings.max_episodes,
        context_length=settings.context_length,
        max_tokens=settings.sampling.max_tokens,
        agent_timeout=settings.agent_timeout_s,
        max_consecutive_parse_errors=settings.max_consecutive_parse_errors,
        context=settings.context,
        summarize_threshold=settings.summarize_threshold,
        history_thinking=settings.history_thinking,
        capture=settings.capture,
        capture_idle_max_s=settings.capture_idle_max_s,
    )


def rollout_job(
    model_dir: str,
    tokenizer_dir: str,
    tasks_json: str,
    template_path: str,
    settings: EvalSettings,
    seed: int,
    signatures: list[str],
    model: str,
    bench: str,
    repeat: int,
    out_path: str,
) -> list[Attempt]:
    from horizon.eval.agent.loop import Wording
    from horizon.eval.sandbox import toolchain
    from horizon.eval.tasks.benchmark import read_manifest

    if settings.harness == "harbor":  # the published Terminus-2 in Harbor's environments (eval/harbor/job.py)
        from horizon.eval.harbor.job import harbor_job

        return harbor_job(model_dir, tasks_json, settings, seed, signatures, repeat, out_path)
    template = Template.load(template_path)
    Wording(template)  # a template worded by the reference parser needs it now, not mid-job
    tasks, errors = read_manifest(tasks_json)
    for e in errors:
        log.error("task %s skipped: %s: %s: %s", e["task"], e["file"], e["field"], e["message"])
    for t in tasks:  # fields the task's owner does not know, or that no sandbox here applies: named
        for w in t.warnings:
            log.warning("task %s: %s: %s: %s", t.id, w["file"], w["field"], w["message"])
    run_id = f"{model}/{bench}/r{repeat}"
    sweep_run(settings.sandbox, run_id)  # sandboxes of this very job left by a killed earlier run
    with toolchain.shared() as tools:
        backend, server = make_backend(settings, model_dir, tokenizer_dir, seed, Path(out_path).parent)
        try:
            options = {"toolchain": tools, **settings.sandbox_options}
            ctx = RunContext(
                settings.sandbox,
                backend,
                template,
                agent_config(settings),
                signatures,
                options,
                run_id=run_id,
                policy=policy(settings),
            )
            return run_repeat(
                tasks,
                settings.attempts,
                repeat,
                ctx,
                out_path,
                seed,
                settings.concurrency,
                settings.max_infra_retries,
                seed_parts=(model, bench),
                made_from=rollout_inputs(model_dir, tasks_json, template_path, settings, seed, signatures),
            )
        finally:
            if server is not None:
                server.stop()
            backend.close()
