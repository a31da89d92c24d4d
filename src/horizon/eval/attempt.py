"""One attempt: a fresh sandbox with the task's files, the agent loop, the task's tests, teardown.

`run_attempt` returns the attempt's record (horizon.eval.settings.Attempt) and its conversation,
and writes its transcript. Infrastructure failures (the sandbox, tmux at start, the backend) are
raised, for the rollout job to retry; everything the agent does to itself is its own failure.
`LiveSandboxes` tracks the sandboxes that are up, so that a signal handler can tear them down.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from horizon.eval.agent import AgentConfig, AgentResult, run_agent
from horizon.eval.llm import Backend
from horizon.eval.prompts import Template
from horizon.eval.sandbox import Sandbox, SandboxError, make_sandbox
from horizon.eval.settings import Attempt
from horizon.eval.tasks import Grade, Task, grade, sandbox_spec
from horizon.io import write_json

log = logging.getLogger("horizon.eval.attempt")


@dataclass
class RunContext:
    """What every attempt of a job shares."""

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


@dataclass
class Outcome:
    record: Attempt
    messages: list[dict]


def failure_mode(g: Grade, res: AgentResult) -> str:
    """Why an attempt failed ("none" when it succeeded)."""
    if g.success:
        return "none"
    if g.timed_out:
        return "test_timeout"
    if "error" in g.detail:
        return "sandbox_exhausted"
    if res.ended == "completed":
        return "tests_failed"
    return res.ended


def _agent_and_grade(
    sb: Sandbox, task: Task, ctx: RunContext, seed: int, clock: dict
) -> tuple[AgentResult, Grade]:
    sb.start()
    clock["started"] = time.monotonic()
    res = run_agent(
        sb, ctx.backend, ctx.template, task.instruction, task.agent_timeout, ctx.agent, seed, ctx.signatures
    )
    clock["agent"] = time.monotonic()
    try:
        g = grade(task, sb)
    except SandboxError as e:
        if not sb.alive():
            raise
        g = Grade(False, 0.0, False, {"error": f"the tests could not run: {e}"}, "")  # the agent broke it
    clock["graded"] = time.monotonic()
    return res, g


def run_attempt(
    task: Task,
    attempt: int,
    repeat: int,
    ctx: RunContext,
    seed: int,
    live: LiveSandboxes,
    transcript: Path | None,
) -> Outcome:
    """One attempt, graded. Raises SandboxError/BackendError/TerminalLost-at-start on infrastructure failure."""
    clock = {"t0": time.monotonic()}
    labels = {"horizon.run": ctx.run_id, "horizon.task": task.id,
              "horizon.attempt": str(attempt), "horizon.repeat": str(repeat)}  # fmt: skip
    sb = make_sandbox(
        ctx.sandbox_kind, sandbox_spec(task, f"{task.id}-a{attempt}-r{repeat}", labels), **ctx.sandbox_options
    )
    live.add(sb)
    try:
        res, g = _agent_and_grade(sb, task, ctx, seed, clock)
    finally:
        sb.stop()
        live.discard(sb)
    end = time.monotonic()
    record = Attempt(
        task=task.id, attempt=attempt, repeat=repeat, success=g.success, reward=g.reward,
        episodes=res.episodes, prompt_tokens=res.prompt_tokens, completion_tokens=res.completion_tokens,
        seconds=round(end - clock["t0"], 3), failure_mode=failure_mode(g, res), ended=res.ended,
        first_complete_episode=res.first_complete_episode, parse_errors=res.parse_errors,
        error_signatures=res.error_signatures, transcript=str(transcript) if transcript else None,
        timing={"start": round(clock["started"] - clock["t0"], 3), "agent": round(clock["agent"] - clock["started"], 3),
                "grade": round(clock["graded"] - clock["agent"], 3), "teardown": round(end - clock["graded"], 3)},
        cache=res.cache,
    )  # fmt: skip
    if transcript:
        write_json(transcript, {**record.to_dict(), "instruction": task.instruction, "messages": res.messages,
                                "events": res.events, "grader": {"detail": g.detail, "output": g.output}})  # fmt: skip
    return Outcome(record, res.messages)
