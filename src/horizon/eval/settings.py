"""Typed records that cross the evaluation's module boundaries: the eval settings and one attempt.

`EvalSettings` is config's `eval:` section as the rollout job, the agent loop and the sandbox
factory see it (built once by the job from the validated config, never passed around as a dict;
its defaults are the schema's). `Attempt` is one line of attempts.jsonl: the contract between the
rollout jobs and the tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields


@dataclass(frozen=True)
class Sampling:
    """config `eval.sampling:`."""

    temperature: float
    top_p: float
    max_tokens: int


@dataclass(frozen=True)
class HarborSettings:
    """config `eval.harbor:` (used when eval.harness is harbor; see horizon/eval/harbor/job.py)."""

    environment: str
    environment_options: Mapping
    toolchain: bool
    agent_options: Mapping
    job_options: Mapping


# keys of config `eval:` that EvalSettings does not carry, and where the job finds them
EVAL_KEYS_ELSEWHERE = {
    "benchmarks": "the benchmark's task manifest (tasks.json)",
    "include_base": "the grid (horizon.grid)",
    "prompt_template": "a rule input: the template file",
}


@dataclass(frozen=True)
class EvalSettings:
    """config `eval:` as validated (the schema's defaults filled; no defaults here, so the two cannot
    disagree), minus EVAL_KEYS_ELSEWHERE."""

    attempts: int
    repeats: int
    harness: str  # horizon | harbor
    sandbox: str
    backend: str
    endpoint: str | None
    endpoint_model: str | None
    concurrency: int
    context_length: int
    max_episodes: int | None
    agent_timeout_s: float | None
    max_infra_retries: int
    max_consecutive_parse_errors: int | None
    context: str
    summarize_threshold: int
    history_thinking: str
    capture: str  # timed (Terminus-2's waits) | idle (then until the pane is idle: reproducible captures)
    capture_idle_max_s: float
    network: str  # declared | owner | none (docs/evaluation/tasks.md)
    same_shell_tests: str  # fresh (a clean grader) | agent (as terminal-bench: the agent's shell)
    sampling: Sampling
    vllm_command: tuple[str, ...]
    vllm_args: tuple[str, ...]
    vllm_prefix_caching: bool
    kv_cache: bool
    batching: bool
    sandbox_options: Mapping
    harbor: HarborSettings
    reference_env: str  # where harbor lives (horizon.eval.reference.environment.env_dir)

    @classmethod
    def from_config(cls, eval_cfg: Mapping) -> EvalSettings:
        """From config's validated `eval:` section (a missing key is an error naming it)."""
        from horizon.config import record_from

        convert = {
            "sampling": lambda v: record_from(Sampling, v, "eval.sampling"),
            "harbor": lambda v: record_from(HarborSettings, v, "eval.harbor"),
            "vllm_command": tuple,
            "vllm_args": tuple,
            "sandbox_options": dict,
        }
        built = {k: f(eval_cfg[k]) for k, f in convert.items() if k in eval_cfg}
        return record_from(cls, eval_cfg, "eval", **built)


@dataclass
class Attempt:
    """One finished attempt, as recorded in attempts.jsonl (one JSON object per line)."""

    task: str
    attempt: int
    repeat: int
    success: bool
    reward: float
    episodes: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    failure_mode: str  # none | tests_failed | agent_timeout | ... | sandbox_killed | tampered | infra_error
    ended: str
    first_complete_episode: int | None = None
    parse_errors: int = 0
    model_calls: int = 0  # every model call, summarisation included
    summary_calls: int = 0  # the calls spent on summarising the history
    summarizations: int = 0  # how many times the history was summarised
    error_signatures: list[dict] = field(default_factory=list)
    transcript: str | None = None
    timing: dict | None = None
    cache: dict | None = None  # the model's prompt cache: hits, misses, reused_tokens (backends that tell)
    error: str | None = None  # infra_error: what failed; harbor: the exception Harbor recorded, if any
    infra_tries: int | None = None  # infra_error only
    evidence: str | None = None  # why the sandbox side failed (which call, which limit, who ended it)
    harness: str = "horizon"  # which harness produced the record: horizon | harbor
    policy: dict | None = None  # the safety switches this attempt ran under (eval.network, ...)
    deviations: list[str] | None = None  # where that made it differ from the task's owner
    steps: list[dict] | None = None  # multi-step tasks: each step's reward and ending
    sandbox: str | None = None  # unsupported only: the sandbox that could not run the task

    def to_dict(self) -> dict:
        out = asdict(self)
        for key in (
            "error",
            "infra_tries",
            "timing",
            "cache",
            "evidence",
            "policy",
            "deviations",
            "steps",
            "sandbox",
        ):
            if out[key] is None:
                del out[key]
        return out

    @classmethod
    def from_dict(cls, rec: Mapping) -> Attempt:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in rec.items() if k in known})

    @classmethod
    def unsupported(
        cls, task: str, attempt: int, repeat: int, reason: str, sandbox: str, policy: dict | None = None
    ) -> Attempt:
        """The sandbox cannot run this task as its owner defines it: a named skip, excluded like an
        infrastructure error and listed under the tables, never a 0."""
        return cls(
            task,
            attempt,
            repeat,
            False,
            0.0,
            0,
            0,
            0,
            0.0,
            "unsupported",
            "unsupported",
            evidence=reason[:1000],
            sandbox=sandbox,
            policy=policy,
        )

    @classmethod
    def infra_error(
        cls,
        task: str,
        attempt: int,
        repeat: int,
        error: str,
        tries: int,
        evidence: str | None = None,
        harness: str = "horizon",
    ) -> Attempt:
        return cls(
            task,
            attempt,
            repeat,
            False,
            0.0,
            0,
            0,
            0,
            0.0,
            "infra_error",
            "infra_error",
            error=error[:1000],
            infra_tries=tries,
            evidence=evidence and evidence[:1000],
            harness=harness,
        )
