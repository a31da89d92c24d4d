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
class EvalSettings:
    """config `eval:` (validated, defaults filled) minus the benchmarks, which the job reads from its manifest."""

    attempts: int = 8
    repeats: int = 4
    sandbox: str = "docker"
    backend: str = "vllm"
    endpoint: str | None = None
    endpoint_model: str | None = None
    concurrency: int = 8
    context_length: int = 32768
    max_episodes: int = 50
    agent_timeout_s: float | None = None
    max_infra_retries: int = 2
    max_consecutive_parse_errors: int = 10
    sampling: Sampling = field(default_factory=Sampling)
    vllm_command: tuple[str, ...] = ("vllm", "serve")
    vllm_args: tuple[str, ...] = ()
    vllm_prefix_caching: bool = True
    kv_cache: bool = True
    batching: bool = True
    sandbox_options: Mapping = field(default_factory=dict)

    @classmethod
    def from_config(cls, eval_cfg: Mapping) -> EvalSettings:
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in eval_cfg.items() if k in known}
        kw["sampling"] = Sampling(**eval_cfg.get("sampling", {}))
        for key in ("vllm_command", "vllm_args"):
            if key in kw:
                kw[key] = tuple(kw[key])
        kw["sandbox_options"] = dict(eval_cfg.get("sandbox_options") or {})
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
    failure_mode: str  # none | tests_failed | agent_timeout | ... | infra_error
    ended: str
    first_complete_episode: int | None = None
    parse_errors: int = 0
    error_signatures: list[dict] = field(default_factory=list)
    transcript: str | None = None
    timing: dict | None = None
    cache: dict | None = None  # the model's prompt cache: hits, misses, reused_tokens (backends that tell)
    error: str | None = None  # infra_error only: what failed
    infra_tries: int | None = None  # infra_error only

    def to_dict(self) -> dict:
        out = asdict(self)
        for key in ("error", "infra_tries", "timing", "cache"):
            if out[key] is None:
                del out[key]
        return out

    @classmethod
    def from_dict(cls, rec: Mapping) -> Attempt:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in rec.items() if k in known})

    @classmethod
    def infra_error(cls, task: str, attempt: int, repeat: int, error: str, tries: int) -> Attempt:
        return cls(task, attempt, repeat, False, 0.0, 0, 0, 0, 0.0, "infra_error", "infra_error",
                   error=error[:1000], infra_tries=tries)  # fmt: skip
