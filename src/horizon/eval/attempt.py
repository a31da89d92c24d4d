"""One attempt: a fresh sandbox with the task's files, the agent loop, the task's tests, teardown.

`run_attempt` returns the attempt's record (horizon.eval.settings.Attempt) and its conversation,
and writes its transcript. Infrastructure failures (the sandbox, tmux at start, the backend) are
raised, for the rollout job to retry; everything the agent does to itself is its own failure.
Which is which rests on evidence (Sandbox.diagnose), recorded in the attempt (`evidence`).
`LiveSandboxes` tracks the sandboxes that are up, so that a signal handler can tear them down.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from horizon.eval import steps as multistep
from horizon.eval.agent.loop import AgentConfig, AgentResult, run_agent
from horizon.eval.agent.prompts import Template
from horizon.eval.grading.grader import Grade, grade
from horizon.eval.models.backends import Backend
from horizon.eval.sandbox import Sandbox, SandboxError, Unsupported, make_sandbox
from horizon.eval.settings import Attempt
from horizon.eval.tasks.benchmark import Step, Task, network_allowed, sandbox_spec
from horizon.io import write_json

log = logging.getLogger("horizon.eval.attempt")


def safety_defaults() -> dict:
    """The safety switches at the schema's defaults (eval.network, eval.same_shell_tests)."""
    from horizon.config import schema_property

    return {k: schema_property("eval", k)["default"] for k in ("network", "same_shell_tests")}


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
    # the safety switches (eval.network, eval.same_shell_tests), recorded in every attempt
    policy: dict = field(default_factory=safety_defaults)


def deviations(task: Task, policy: dict) -> list[str]:
    """Where this attempt runs the task otherwise than its owner would, because of a safety switch."""
    out = []
    given = network_allowed(task, policy["network"])
    if given != task.owner_network:
        owner = "the public network" if task.owner_network else "no network"
        out.append(
            f"network: {'public' if given else 'none'} (its owner gives {owner}; eval.network = "
            f"{policy['network']})"
        )
    if task.same_shell and policy["same_shell_tests"] == "fresh":
        out.append(
            "tests: a fresh grader shell (the task asks for the agent's: run_tests_in_same_shell; "
            "eval.same_shell_tests = fresh)"
        )
    return out


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
    if g.failure_mode == "tampered":  # it changed what grades it: the tests did not run
        return g.failure_mode
    if g.timed_out:
        return "test_timeout"
    if g.failure_mode in (
        "sandbox_exhausted",
        "sandbox_killed",
    ):  # the tests could not run: the agent's doing
        return g.failure_mode
    if res.ended != "completed":
        return res.ended
    return g.failure_mode or "tests_failed"


def grade_attempt(sb: Sandbox, task: Task, step: Step | None = None, agent_shell: bool = False) -> Grade:
    """The task's tests; a sandbox failure is the agent's (a Grade) or the harness's (raised), by evidence."""
    try:
        return grade(task, sb, step=step, network=sb.spec.allow_internet, agent_shell=agent_shell)
    except SandboxError as e:
        d = sb.diagnose()
        if not d.agents_doing:  # the sandbox is fine and our own call failed, or it is gone: infrastructure
            raise SandboxError(f"grading {task.id}: {e}", evidence=f"{d.state}: {d.evidence}") from None
        return Grade(
            False, 0.0, False, {"error": f"the tests could not run: {e}"}, "", d.failure_mode, d.evidence
        )


def _agent_and_grade(
    sb: Sandbox, task: Task, ctx: RunContext, seed: int, clock: dict
) -> tuple[AgentResult, Grade, list[dict] | None]:
    sb.start()
    clock["started"] = time.monotonic()
    if not task.steps:
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
        clock["agent"] = time.monotonic()
        g = grade_attempt(sb, task, agent_shell=ctx.policy.get("same_shell_tests") == "agent")
        clock["graded"] = time.monotonic()
        return res, g, None
    results, grades, records = [], [], []
    for i, step in enumerate(task.steps):
        multistep.prepare_step(sb, step, first=i == 0)
        res = run_agent(
            sb,
            ctx.backend,
            ctx.template,
            step.instruction,
            step.agent_timeout,
            ctx.agent,
            seed + i,
            ctx.signatures,
        )
        g = grade_attempt(sb, task, step)
        stopped = multistep.below_min_reward(step, g)
        results.append(res)
        grades.append(g)
        records.append(multistep.step_record(step, res, g, stopped))
        if stopped:
            break
    clock["agent"] = clock["graded"] = time.monotonic()
    return multistep.merge_results(results), multistep.combined_grade(task, grades, records), records


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
    labels = {
        "horizon.run": ctx.run_id,
        "horizon.task": task.id,
        "horizon.attempt": str(attempt),
        "horizon.repeat": str(repeat),
    }
    spec = sandbox_spec(task, f"{task.id}-a{attempt}-r{repeat}", labels, ctx.policy["network"])
    sb = make_sandbox(ctx.sandbox_kind, spec, **ctx.sandbox_options)
    live.add(sb)
    try:
        res, g, step_records = _agent_and_grade(sb, task, ctx, seed, clock)
    except Unsupported as e:
        log.warning("%s: %s (recorded as unsupported, never a 0)", task.id, e)
        rec = Attempt.unsupported(task.id, attempt, repeat, e.reason, ctx.sandbox_kind, dict(ctx.policy))
        return Outcome(rec, [])
    finally:
        sb.stop()
        live.discard(sb)
    end = time.monotonic()
    record = Attempt(
        task=task.id,
        attempt=attempt,
        repeat=repeat,
        success=g.success,
        reward=g.reward,
        episodes=res.episodes,
        prompt_tokens=res.prompt_tokens,
        completion_tokens=res.completion_tokens,
        seconds=round(end - clock["t0"], 3),
        failure_mode=failure_mode(g, res),
        ended=res.ended,
        evidence=(res.evidence or g.evidence) if not g.success else None,
        first_complete_episode=res.first_complete_episode,
        parse_errors=res.parse_errors,
        model_calls=res.model_calls,
        summary_calls=res.summary_calls,
        summarizations=res.summarizations,
        error_signatures=res.error_signatures,
        transcript=str(transcript) if transcript else None,
        policy=dict(ctx.policy),
        deviations=deviations(task, ctx.policy) or None,
        steps=step_records,
        timing={
            "start": round(clock["started"] - clock["t0"], 3),
            "agent": round(clock["agent"] - clock["started"], 3),
            "grade": round(clock["graded"] - clock["agent"], 3),
            "teardown": round(end - clock["graded"], 3),
        },
        cache=res.cache,
    )
    if transcript:
        write_json(
            transcript,
            {
                **record.to_dict(),
                "instruction": task.instruction,
                "messages": res.messages,
                "events": res.events,
                "grader": {"detail": g.detail, "output": g.output},
            },
        )
    return Outcome(record, res.messages)
