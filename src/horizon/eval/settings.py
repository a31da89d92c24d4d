"""Typed records that cross the evaluation's module boundaries: the eval settings and one attempt.

`EvalSettings` is config's `eval:` section as the rollout job, the agent loop and the sandbox
factory see it (built once by the job, never passed around as a dict). `Attempt` is one line of
attempts.jsonl: the contract between the rollout jobs and the tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.6
    top_p: float = 0.95
    max_tokens: int = 8192


@dataclass(frozen=True)
class HarborSettings:
    """config `eval.harbor:` (used when eval.harness is harbor; see horizon/eval/harbor.py)."""

    environment: str = "docker"
    environment_options: Mapping = field(default_factory=dict)
    toolchain: bool = True
    agent_options: Mapping = field(default_factory=dict)
    job_options: Mapping = field(default_factory=dict)


HARBOR_KEYS = {f.name for f in fields(HarborSettings)}


@dataclass(frozen=True)
class EvalSettings:
    """config `eval:` (validated, defaults filled) minus the benchmarks, which the job reads from its manifest."""

    attempts: int = 8
    repeats: int = 4
    harness: str = "horizon"  # horizon | harbor
    sandbox: str = "docker"
    backend: str = "vllm"
    endpoint: str | None = None
    endpoint_model: str | None = None
    concurrency: int = 8
    context_length: int = 32768
    max_episodes: int | None = None
    agent_timeout_s: float | None = None
    max_infra_retries: int = 2
    max_consecutive_parse_errors: int | None = None
    context: str = "summarize"
    summarize_threshold: int = 8000
    history_thinking: str = "drop"
    network: str = "declared"  # declared | owner | none (docs/evaluation/tasks.md)
    same_shell_tests: str = "fresh"  # fresh (a clean grader) | agent (as terminal-bench: the agent's shell)
    sampling: Sampling = field(default_factory=Sampling)
    vllm_command: tuple[str, ...] = ("vllm", "serve")
    vllm_args: tuple[str, ...] = ()
    vllm_prefix_caching: bool = True
    kv_cache: bool = True
    batching: bool = True
    sandbox_options: Mapping = field(default_factory=dict)
    harbor: HarborSettings = field(default_factory=HarborSettings)
    reference_env: str | None = None  # where harbor lives (horizon.eval.reference.env_dir)

    @classmethod
    def from_config(cls, eval_cfg: Mapping) -> EvalSettings:
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in eval_cfg.items() if k in known}
        kw["sampling"] = Sampling(**eval_cfg.get("sampling", {}))
        for key in ("vllm_command", "vllm_args"):
            if key in kw:
                kw[key] = tuple(kw[key])
        kw["sandbox_options"] = dict(eval_cfg.get("sandbox_options") or {})
        harbor = dict(eval_cfg.get("harbor") or {})
        kw["harbor"] = HarborSettings(**{k: harbor[k] for k in HARBOR_KEYS if k in harbor})
        return cls(**kw)


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
    failure_mode: str  # none | tests_failed | agent_timeout | ... | sandbox_killed | infra_error
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
    def unsupported(cls, task: str, attempt: int, repeat: int, reason: str, sandbox: str,
                    policy: dict | None = None) -> Attempt:  # fmt: skip
        """The sandbox cannot run this task as its owner defines it: a named skip, excluded like an
        infrastructure error and listed under the tables, never a 0."""
        return cls(task, attempt, repeat, False, 0.0, 0, 0, 0, 0.0, "unsupported", "unsupported",
                   evidence=reason[:1000], sandbox=sandbox, policy=policy)  # fmt: skip

    @classmethod
    def infra_error(
        cls, task: str, attempt: int, repeat: int, error: str, tries: int, evidence: str | None = None,
        harness: str = "horizon",
    ) -> Attempt:  # fmt: skip
        return cls(task, attempt, repeat, False, 0.0, 0, 0, 0, 0.0, "infra_error", "infra_error",
                   error=error[:1000], infra_tries=tries, evidence=evidence and evidence[:1000],
                   harness=harness)  # fmt: skip
