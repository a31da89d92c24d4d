"""A synthesized task in a real sandbox: does it build, does its reference solution pass its tests, and
does a lazy attempt fail them?

Each check runs in a fresh sandbox of the configured kind (`eval.sandbox`: local bubblewrap replaying
the Dockerfile, or docker building it), through the same protocol and graders the rollouts use. Two
lazy attacks: `nothing` (the tests run on the environment as built) and `empty` (every absolute /app
path the instruction names that the environment lacks is created as an empty file). Times are kept
per check (build, solution, tests, attack): bench/synth.py reports them.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from horizon.eval.attempt import grade_attempt
from horizon.eval.grading.grader import Grade
from horizon.eval.sandbox import SandboxError, Unsupported, make_sandbox
from horizon.eval.tasks.benchmark import Task, sandbox_spec

LOG_CHARS = 4000
APP_PATH = re.compile(r"(?<![\w/.-])(/app/[\w./-]*[\w-])")


class Rejected(Exception):
    """The task fails a check; `stage` names the check (build, solution, round_trip, attack), `reason` why."""

    def __init__(self, stage: str, reason: str, log: str = ""):
        super().__init__(f"{stage}: {reason}")
        self.stage, self.reason, self.log = stage, reason, log


@dataclass
class Verifier:
    kind: str  # eval.sandbox
    options: dict = field(default_factory=dict)  # eval.sandbox_options (+ the graders' toolchain)
    timings: dict = field(default_factory=dict)  # check -> seconds, summed over this task's checks

    def _clock(self, name: str, t0: float) -> None:
        self.timings[name] = round(self.timings.get(name, 0.0) + time.perf_counter() - t0, 3)

    def _sandbox(self, task: Task, name: str):
        return make_sandbox(self.kind, sandbox_spec(task, f"synth-{task.id}-{name}"), **self.options)

    def _start(self, sb, task: Task) -> None:
        t0 = time.perf_counter()
        try:
            sb.start()
        except Unsupported as e:
            raise Rejected("build", f"the {self.kind} sandbox cannot build it: {e.reason}") from None
        except SandboxError as e:
            raise Rejected("build", f"the environment does not build: {e}", e.evidence or "") from None
        finally:
            self._clock("build", t0)

    def build(self, task: Task) -> str:
        """The environment as the agent finds it (its working directory, listed); Rejected at build."""
        sb = self._sandbox(task, "build")
        try:
            self._start(sb, task)
            r = sb.exec("ls -la . && find . -maxdepth 3 -type f | head -50", timeout=30)
            return cut(r.stdout + r.stderr)
        finally:
            sb.stop()

    def _solve(self, sb, task: Task) -> str:
        t0 = time.perf_counter()
        try:
            sb.put(Path(task.path) / "solution", "/tmp/solution")
            r = sb.exec(
                ["bash", "/tmp/solution/solve.sh"],
                timeout=task.agent_timeout or 600,
                env=task.solution_env or None,
            )
        except SandboxError as e:
            raise Rejected("solution", f"the reference solution broke its sandbox: {e}") from None
        finally:
            self._clock("solution", t0)
        out = cut(r.stdout + r.stderr)
        if not r.ok:
            why = "timed out" if r.timed_out else f"exits {r.rc}"
            raise Rejected("solution", f"the reference solution {why}", out)
        return out

    def run_solution(self, task: Task) -> str:
        """The solution run once on the built environment: its output (what the tests stage sees)."""
        sb = self._sandbox(task, "solve")
        try:
            self._start(sb, task)
            return self._solve(sb, task)
        finally:
            sb.stop()

    def _grade(self, sb, task: Task, clock: str) -> Grade:
        t0 = time.perf_counter()
        try:
            return grade_attempt(sb, task)
        except SandboxError as e:
            raise Rejected("round_trip", f"the tests could not run: {e}") from None
        finally:
            self._clock(clock, t0)

    def round_trip(self, task: Task) -> None:
        """The reference solution, then the tests, in a fresh sandbox: they must pass."""
        sb = self._sandbox(task, "trip")
        try:
            self._start(sb, task)
            self._solve(sb, task)
            g = self._grade(sb, task, "tests")
        finally:
            sb.stop()
        if not g.success:
            detail = g.evidence or ", ".join(f"{k} {v}" for k, v in g.detail.items())
            raise Rejected(
                "round_trip",
                f"the reference solution fails the tests (reward {g.reward}; {detail})",
                cut(g.output),
            )

    def attack(self, task: Task, mode: str) -> None:
        """A lazy attempt (`nothing` or `empty`) in a fresh sandbox: the tests must fail it."""
        sb = self._sandbox(task, f"lazy-{mode}")
        try:
            self._start(sb, task)
            t0 = time.perf_counter()
            made = []
            if mode == "empty":
                for p in output_paths(task.instruction):
                    r = sb.exec(
                        f"test -e {p} || {{ mkdir -p $(dirname {p}) && : > {p} && echo {p}; }}", timeout=30
                    )
                    made += r.stdout.split()
            self._clock("attack", t0)
            g = self._grade(sb, task, "attack")
        finally:
            sb.stop()
        if g.success:
            what = f"empty files at {', '.join(made)}" if made else "nothing done"
            raise Rejected("attack", f"a lazy attempt ({mode}: {what}) passes the tests", cut(g.output))


def output_paths(instruction: str) -> list[str]:
    """The absolute /app paths an instruction names, in order, once each (what `empty` creates if absent)."""
    return list(dict.fromkeys(APP_PATH.findall(instruction)))


def cut(text: str, limit: int = LOG_CHARS) -> str:
    """The end of a log (where the error is)."""
    return (
        text if len(text) <= limit else f"[... {len(text) - limit} characters omitted ...]\n{text[-limit:]}"
    )
