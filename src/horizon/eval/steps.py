"""Multi-step Harbor tasks (`[[steps]]`), run step by step as harbor 0.26.0 runs them.

In one sandbox, for each step in order: the previous step's tests and verifier logs are removed (so
the agent never sees them), the step's `workdir/` files are copied into the working directory and
its `setup.sh` run there, the agent runs on the step's own instruction (a fresh conversation and
terminal, the step's agent timeout), then the step's tests (its own tests/ over the shared ones,
its verifier timeout). A step whose reward falls below its `min_reward` (a number gates the
"reward" key; a table gates each key it names; no reward counts as -inf) ends the attempt.
The attempt's reward is the mean over the steps that produced a reward (`multi_step_reward_strategy
= "mean"`, missing keys counting 0) or the last step's (`final`); success is a reward of 1. Every
step is recorded (name, reward, success, episodes, how its agent ended) in the attempt's `steps`.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from horizon.eval.agent.loop import AgentResult
from horizon.eval.grading.grader import Grade
from horizon.eval.sandbox import Sandbox, SandboxError
from horizon.eval.tasks.benchmark import Step, Task

# failures of the agent's own doing that the grader finds before any test runs (the attempt's, whatever the other steps)
AGENT_FAILURES = ("tampered", "sandbox_exhausted", "sandbox_killed")
SUMMED = (
    "episodes",
    "prompt_tokens",
    "completion_tokens",
    "parse_errors",
    "seconds",
    "model_calls",
    "summary_calls",
    "summarizations",
)


def prepare_step(sb: Sandbox, step: Step, first: bool) -> None:
    """The step's files into the working directory and its setup script, after the previous step's grading."""
    if not first:
        sb.resume()  # a backend that stopped the sandbox to grade the previous step starts it again
        sb.clear_grading()
    if not step.workdir_files:
        return
    for p in sorted(Path(step.workdir_files).iterdir()):
        sb.put(p, f"{sb.workdir.rstrip('/')}/{p.name}")
    if (Path(step.workdir_files) / "setup.sh").is_file():
        r = sb.exec(["bash", f"{sb.workdir.rstrip('/')}/setup.sh"], timeout=600)
        if not r.ok:
            raise SandboxError(f"step {step.name}: setup.sh exited {r.rc}: {(r.stdout + r.stderr)[-300:]}")


def below_min_reward(step: Step, g: Grade) -> str | None:
    """Why the attempt stops after this step, or None (always after a step its agent failed by its own
    doing before the tests: tampered, sandbox_exhausted, sandbox_killed)."""
    if g.failure_mode in AGENT_FAILURES:
        return f"{g.failure_mode}: {g.evidence}"
    if step.min_reward is None:
        return None
    gates = {"reward": step.min_reward} if isinstance(step.min_reward, int | float) else dict(step.min_reward)
    rewards = g.rewards or ({"reward": g.reward} if g.detail.get("reward_found") else {})
    for key, threshold in gates.items():
        got = rewards.get(key, float("-inf"))
        if got < threshold:
            return f"{key} = {got} below min_reward {threshold}"
    return None


def aggregate(task: Task, grades: list[Grade]) -> float | None:
    """The attempt's reward from its steps' rewards (Harbor's mean or final strategy)."""
    valid = [g for g in grades if g.detail.get("reward_found") or g.rewards]
    if not valid:
        return None
    if task.reward_strategy == "final":
        last = grades[-1]
        return last.reward if last in valid else None
    return sum((g.rewards or {"reward": g.reward}).get("reward", 0.0) for g in valid) / len(valid)


def merge_results(results: list[AgentResult]) -> AgentResult:
    """One AgentResult for the attempt: counts summed, conversations and events concatenated."""
    out = AgentResult(messages=[], episodes=0, ended=results[-1].ended)
    for r in results:
        for f in fields(AgentResult):
            if f.name in SUMMED:
                setattr(out, f.name, getattr(out, f.name) + getattr(r, f.name))
        out.messages += r.messages
        out.events += r.events
        out.error_signatures += r.error_signatures
        if out.first_complete_episode is None and r.first_complete_episode is not None:
            out.first_complete_episode = r.first_complete_episode
        out.evidence = r.evidence or out.evidence
    return out


def step_record(step: Step, res: AgentResult, g: Grade, stopped: str | None) -> dict:
    rec = {
        "name": step.name,
        "reward": g.reward,
        "success": g.success,
        "episodes": res.episodes,
        "ended": res.ended,
        "reward_file": g.detail.get("reward_file"),
    }
    if g.evidence:
        rec["evidence"] = g.evidence
    if stopped:
        rec["stopped"] = stopped
    return rec


def combined_grade(task: Task, grades: list[Grade], records: list[dict]) -> Grade:
    reward = aggregate(task, grades)
    timed_out = any(g.timed_out for g in grades)
    own = next((g for g in grades if g.failure_mode in AGENT_FAILURES), None)
    ok = reward is not None and reward >= 1.0 - 1e-9 and not timed_out and own is None
    last = grades[-1]
    why = own or next((g for g in grades if g.timed_out), last)  # the step that says why it failed
    detail = {"steps": records, "reward_strategy": task.reward_strategy, "reward_found": reward is not None}
    return Grade(ok, float(reward or 0.0), timed_out, detail, last.output, why.failure_mode, why.evidence)
