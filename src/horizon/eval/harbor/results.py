"""Harbor's job results as our records: one Attempt (attempts.jsonl) and one transcript per trial.

A Harbor job directory holds config.json, result.json and one directory per trial
(`<task>__<id>/`: result.json, agent/trajectory.json, verifier/, exception.txt on error). Each
finished trial is one attempt, numbered per task in the order the trials started. Where each field
of the record comes from:

- reward and success: the verifier's rewards (key `reward`, else `score`, else the first number, as
  our graders read reward.json); success = reward >= 1 with no exception that voids it;
- episodes, first_complete_episode, parse_errors, error_signatures: the agent steps of the trajectory.
  The job keeps each answer raw in it, so our parser judges every answer (it decides exactly as
  Terminus-2's: tests/conformance), and signatures are scanned on the terminal output that followed
  each usable answer, as our loop does;
- tokens: Harbor's counts (the server's usage numbers); model_calls: its recorded model requests;
  summarizations: its summarization count; seconds and timing: the trial's phase timestamps;
- failure_mode and ended: Harbor's exception and the verifier's result (`classify`). Harbor records
  with every exception its own error policy; an exception after which it did not grade, or that
  leaves no valid reward and is neither the agent's nor the verifier's doing (the environment's build
  or start, the agent's setup, the model API), is `infra_error` with its evidence (type, message,
  the trial's exception.txt): excluded from the metrics, never scored as a failure.
- A trial cancelled by a signal (CancelledError) or left without result.json is not an attempt:
  Harbor's resume deletes and reruns it; one that Harbor wrote up with neither a reward nor an
  exception (interrupted mid-step) is not one either, and is deleted before the resume.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from horizon.eval.settings import Attempt
from horizon.terminus import THINK_END, THINK_START, parse_answer

log = logging.getLogger("horizon.eval.harbor")

HARNESS = "harbor"
CANCELLED = "CancelledError"
# the agent's own endings (Harbor grades after them): our `ended` values
AGENT_ENDINGS = {
    "AgentTimeoutError": "agent_timeout",
    "ContextLengthExceededError": "context_length",
    "ContextWindowExceededError": "context_length",
    "OutputLengthExceededError": "output_length",
    "OutputTokenExceededError": "output_length",
}
VERIFIER_TIMEOUT = "VerifierTimeoutError"
NO_REWARD = {"RewardFileNotFoundError", "RewardFileEmptyError", "VerifierOutputParseError"}


class HarborResultError(RuntimeError):
    """A Harbor result file is not what the converter expects (the message names the file)."""


@dataclass
class Trial:
    """One finished trial: its directory and its result.json."""

    dir: Path
    result: dict

    @property
    def exception(self) -> dict | None:
        return self.result.get("exception_info")

    @property
    def task_path(self) -> str | None:
        return ((self.result.get("config") or {}).get("task") or {}).get("path")


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise HarborResultError(f"{path}: cannot be read as JSON ({e})") from None


def interrupted(result: dict) -> bool:
    """A result.json with neither a reward nor an exception: Harbor wrote it for a trial that the
    signal's KeyboardInterrupt hit mid-step (it records no exception then); its resume would keep it."""
    return not result.get("exception_info") and not (result.get("verifier_result") or {}).get("rewards")


def read_trials(job_dir: str | Path) -> tuple[list[Trial], list[str]]:
    """(finished trials, names of the trial directories that are no attempt: cancelled, interrupted
    or unfinished)."""
    trials, skipped = [], []
    for d in sorted(p for p in Path(job_dir).iterdir() if p.is_dir()):
        if not (d / "result.json").exists():
            skipped.append(d.name)
            continue
        t = Trial(d, read_json(d / "result.json"))
        if (t.exception or {}).get("exception_type") == CANCELLED or interrupted(t.result):
            skipped.append(d.name)
            continue
        trials.append(t)
    return trials, skipped


def drop_interrupted(job_dir: str | Path) -> list[str]:
    """Delete the interrupted trials (see `interrupted`), so that Harbor's resume runs them again."""
    dropped = []
    for f in sorted(Path(job_dir).glob("*/result.json")):
        if interrupted(read_json(f)):
            shutil.rmtree(f.parent)
            dropped.append(f.parent.name)
    if dropped:
        log.warning(
            "%d interrupted trial(s) of %s will run again: %s", len(dropped), job_dir, ", ".join(dropped)
        )
    return dropped


def reward_of(rewards: dict | None) -> float | None:
    if not rewards:
        return None
    for key in ("reward", "score"):
        if _number(rewards.get(key)):
            return float(rewards[key])
    nums = [v for v in rewards.values() if _number(v)]
    return float(nums[0]) if nums else None


def _number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _time(stamp: str | None) -> datetime | None:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None


def _span(phase: dict | None) -> float:
    if not phase or not phase.get("started_at") or not phase.get("finished_at"):
        return 0.0
    return (_time(phase["finished_at"]) - _time(phase["started_at"])).total_seconds()


def timing(result: dict) -> tuple[float, dict]:
    """(seconds, {start, agent, grade, teardown}) from the trial's phase timestamps."""
    t0, t1 = _time(result.get("started_at")), _time(result.get("finished_at"))
    total = (t1 - t0).total_seconds() if t0 and t1 else 0.0
    start = _span(result.get("environment_setup")) + _span(result.get("agent_setup"))
    agent, grade = _span(result.get("agent_execution")), _span(result.get("verifier"))
    parts = {
        "start": start,
        "agent": agent,
        "grade": grade,
        "teardown": max(total - start - agent - grade, 0.0),
    }
    return round(total, 3), {k: round(v, 3) for k, v in parts.items()}


@dataclass
class Episodes:
    """What the trajectory's agent steps say, judged by our parser."""

    count: int = 0
    parse_errors: int = 0
    first_complete: int | None = None
    completed: bool = False
    signatures: list[dict] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)


def _observation(step: dict) -> str:
    results = (step.get("observation") or {}).get("results") or []
    return "\n".join(r["content"] for r in results if isinstance(r.get("content"), str))


def _judge(step: dict, raw: bool) -> tuple[bool, bool]:
    """(usable, task_complete) of one agent step."""
    if raw:  # the answer as Terminus-2's parser was handed it
        r = parse_answer(step.get("message") or "", "harbor")
        return r.error is None, bool(r.error is None and r.task_complete)
    calls = step.get("tool_calls")  # a trajectory without raw answers: Harbor's own reading
    if calls is None:
        return False, False  # (also a usable answer with no command and no completion: rare)
    return True, any(c.get("function_name") == "mark_task_complete" for c in calls)


def read_episodes(trajectory: dict, patterns: list[re.Pattern]) -> Episodes:
    steps = trajectory.get("steps") or []
    agent = [s for s in steps if s.get("source") == "agent"]
    raw = not any(s.get("tool_calls") for s in agent)
    ep, pending = Episodes(), False
    for step in steps:
        obs = _observation(step)
        if step.get("source") == "user" and step.get("message"):
            ep.messages.append({"role": "user", "content": step["message"]})
        if step.get("source") != "agent":
            continue
        k, ep.count = ep.count, ep.count + 1
        ep.messages.append({"role": "assistant", "content": _with_reasoning(step)})
        if obs:
            ep.messages.append({"role": "user", "content": obs})
        usable, complete = _judge(step, raw)
        if not usable:
            ep.parse_errors += 1  # no command ran; a pending completion stays pending (as Terminus-2)
            continue
        ep.signatures += [{"pattern": p.pattern, "episode": k} for p in patterns if p.search(obs)]
        if complete:
            ep.first_complete = k if ep.first_complete is None else ep.first_complete
            ep.completed = ep.completed or pending
            pending = True
        else:
            pending = False
    return ep


def _with_reasoning(step: dict) -> str:
    """The answer as the model wrote it: reasoning (split off by the server) back in its tags."""
    content, reasoning = step.get("message") or "", step.get("reasoning_content")
    return f"{THINK_START}\n{reasoning}\n{THINK_END}\n\n{content}" if reasoning else content


def _evidence(trial: Trial) -> str:
    e = trial.exception or {}
    where = trial.dir / "exception.txt"
    return f"harbor {e.get('exception_type')}: {(e.get('exception_message') or '').strip()[:700]} ({where})"


def classify(trial: Trial, ep: Episodes, max_turns: int | None) -> tuple[str, str, float | None]:
    """(failure_mode, ended, reward or None): failure_mode 'infra_error' when the trial is Harbor's or
    the environment's failure rather than the agent's (see the module docstring)."""
    res, exc = trial.result, trial.exception
    kind = (exc or {}).get("exception_type")
    policy = (exc or {}).get("policy") or {}
    rewards = (res.get("verifier_result") or {}).get("rewards")
    reward = reward_of(rewards) if res.get("reward_valid", True) else None
    if kind in AGENT_ENDINGS:
        ended = AGENT_ENDINGS[kind]
    elif ep.completed:
        ended = "completed"
    elif max_turns is not None and ep.count >= max_turns:
        ended = "max_episodes"
    else:
        ended = "agent_error" if kind and res.get("agent_execution") else "terminal_lost"
    if kind == VERIFIER_TIMEOUT:
        return "test_timeout", ended, None
    if kind in NO_REWARD:
        return ("tests_failed" if ended == "completed" else ended), ended, None
    agent_ran = bool(res.get("agent_execution"))
    if kind and (
        policy.get("should_grade") is False or not agent_ran or (reward is None and kind not in AGENT_ENDINGS)
    ):
        return "infra_error", "infra_error", None
    if reward is not None and reward >= 1.0 - 1e-9:
        return "none", ended, reward
    return ("tests_failed" if ended == "completed" else ended), ended, reward


def to_attempt(trial: Trial, task: str, attempt: int, repeat: int, patterns, max_turns, retries: int):
    """(the attempt's record, its transcript) from one finished trial."""
    res = trial.result
    traj_path = trial.dir / "agent" / "trajectory.json"
    ep = read_episodes(read_json(traj_path), patterns) if traj_path.exists() else Episodes()
    failure, ended, reward = classify(trial, ep, max_turns)
    if failure == "infra_error":
        retried = ((trial.exception or {}).get("policy") or {}).get("should_retry")  # Harbor retried it
        tries = retries + 1 if retried else 1
        rec = Attempt.infra_error(task, attempt, repeat, _evidence(trial), tries, harness=HARNESS)
        return rec, {**rec.to_dict(), "harbor_trial": str(trial.dir), "messages": ep.messages}
    agent = res.get("agent_result") or {}
    meta = agent.get("metadata") or {}
    seconds, parts = timing(res)
    summaries = list((trial.dir / "agent").glob("trajectory.summarization-*.json"))
    rec = Attempt(
        task=task,
        attempt=attempt,
        repeat=repeat,
        success=failure == "none",
        reward=float(reward or 0.0),
        episodes=ep.count or int(meta.get("n_episodes") or 0),
        seconds=seconds,
        failure_mode=failure,
        prompt_tokens=int(agent.get("n_input_tokens") or 0),
        completion_tokens=int(agent.get("n_output_tokens") or 0),
        ended=ended,
        first_complete_episode=ep.first_complete,
        parse_errors=ep.parse_errors,
        model_calls=len(meta.get("api_request_times_msec") or []),
        summary_calls=len(summaries),
        summarizations=int(meta.get("summarization_count") or 0),
        error_signatures=ep.signatures,
        timing=parts,
        error=_evidence(trial) if trial.exception else None,
        harness=HARNESS,
    )
    return rec, {**rec.to_dict(), "harbor_trial": str(trial.dir), "messages": ep.messages}


@dataclass
class Converted:
    records: list[Attempt]
    transcripts: dict[tuple[str, int], dict]
    missing: list[tuple[str, int]]  # (task, attempt) without a finished trial
    skipped: list[str]  # trial directories that are no attempt (cancelled, unfinished)


def convert_job(
    job_dir: str | Path,
    tasks: dict[str, str],
    attempts: int,
    repeat: int,
    signatures: list[str] = (),
    max_turns: int | None = None,
    retries: int = 0,
) -> Converted:
    """Every finished trial of a job as an attempt. `tasks`: task directory -> our task id."""
    trials, skipped = read_trials(job_dir)
    by_path = {str(Path(p).resolve()): t for p, t in tasks.items()}
    by_name = {Path(p).name: t for p, t in tasks.items()}
    grouped: dict[str, list[Trial]] = defaultdict(list)
    for t in trials:
        tid = by_path.get(str(Path(t.task_path or "").resolve())) or by_name.get(t.result.get("task_name"))
        if tid is None:
            raise HarborResultError(f"{t.dir / 'result.json'}: task {t.task_path!r} is not one of this job's")
        grouped[tid].append(t)
    patterns = [re.compile(s) for s in signatures]
    out = Converted([], {}, [], skipped)
    for tid in sorted(set(tasks.values())):
        done = sorted(grouped.get(tid, []), key=lambda t: (t.result.get("started_at") or "", t.dir.name))
        if len(done) > attempts:
            log.warning(
                "%s: %d finished trials for %d attempts; the first %d count",
                tid,
                len(done),
                attempts,
                attempts,
            )
        for a, trial in enumerate(done[:attempts]):
            rec, transcript = to_attempt(trial, tid, a, repeat, patterns, max_turns, retries)
            out.records.append(rec)
            out.transcripts[(tid, a)] = transcript
        out.missing += [(tid, a) for a in range(len(done), attempts)]
    return out
