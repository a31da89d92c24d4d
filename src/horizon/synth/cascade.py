"""One seed through the cascade: instruction -> environment -> (build) -> solution -> (run) -> tests
-> review rounds -> verification. Every stage sees the files written so far and the execution logs.

The author and the reviewer are any OpenAI-compatible chat endpoints (eval.llm.ChatBackend: the
`openai` client's retries and timeouts). A stage answer that is not the requested files is asked
again (`synth.attempts` answers in all), then the seed is rejected at that stage with the answer
kept; an endpoint that fails after the client's retries is not the seed's fault: BackendError is
raised for the run to stop (finished seeds are in its journal).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import jinja2

from horizon.eval.models.backends import Backend
from horizon.eval.tasks.benchmark import TaskError, load_harbor
from horizon.synth.files import BadAnswer, parse_files, parse_review
from horizon.synth.seeds import Seed
from horizon.synth.verify import Rejected, Verifier

# stage -> (files it must write, paths it may write)
STAGES = {
    "instruction": (("instruction.md",), ("instruction.md",)),
    "environment": (("environment/Dockerfile",), ("environment",)),
    "solution": (("solution/solve.sh",), ("solution",)),
    "tests": (("tests/test.sh",), ("tests",)),
}
# the order a seed goes through (a rejection names one of these; `kept` is the end)
FUNNEL = tuple("instruction environment files build solution tests review round_trip attack kept".split())


# keys of config `synth:` that SynthSettings does not carry, and where they go
SYNTH_KEYS_ELSEWHERE = {
    "enabled": "the grid (the synth rule exists or not)",
    "seeds": "load_seeds",
    "min_score": "load_seeds",
    "domains": "load_seeds",
    "endpoint": "the author's backend",
    "review_endpoint": "the reviewer's backend",
    "api_key_env": "the backends",
    "temperature": "the backends",
    "max_retries": "the backends",
    "timeout_s": "the backends",
    "concurrency": "synthesize",
    "prompts": "a rule input: the templates",
}


@dataclass
class SynthSettings:
    """config `synth:` as the cascade sees it, validated (the schema's defaults filled; none here)."""

    model: str
    review_model: str  # the config's null (= model) resolved
    attempts: int  # answers asked per stage before the seed is rejected there
    review_rounds: int  # revisions of the tests the reviewer's findings may cause
    max_tokens: int
    resources: dict  # task.toml: cpus, memory_mb, timeouts

    @classmethod
    def from_config(cls, synth_cfg: Mapping) -> SynthSettings:
        """From config's validated `synth:` section (a missing key is an error naming it)."""
        from horizon.config import record_from

        built = {"review_model": synth_cfg.get("review_model") or synth_cfg.get("model")}
        if "resources" in synth_cfg:
            built["resources"] = dict(synth_cfg["resources"])
        return record_from(cls, synth_cfg, "synth", **built)

    def tag(self, prompts_digest: str) -> dict:
        return {
            "model": self.model,
            "review_model": self.review_model,
            "prompts": prompts_digest,
            "review_rounds": self.review_rounds,
        }


def prompts(directory: str | Path) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(directory)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def task_toml(seed: Seed, settings: SynthSettings) -> str:
    """The task's task.toml: Harbor's fields, with the resources and timeouts of `synth.resources`."""
    r = settings.resources
    tags = ", ".join(
        f'"{t}"' for t in ("synthesized", seed.kind, *seed.tags) if t.isprintable() and '"' not in t
    )
    return "\n".join(
        [
            'version = "1.0"',
            "",
            "[metadata]",
            'author_name = "horizon synth"',
            f'source = "{seed.kind}:{seed.id}"',
            f'category = "{seed.domain or "qa"}"',
            f"tags = [{tags}]",
            "",
            "[verifier]",
            f"timeout_sec = {float(r['verifier_timeout_sec'])}",
            "",
            "[agent]",
            f"timeout_sec = {float(r['agent_timeout_sec'])}",
            "",
            "[environment]",
            f"build_timeout_sec = {float(r['build_timeout_sec'])}",
            f"cpus = {int(r['cpus'])}",
            f"memory_mb = {int(r['memory_mb'])}",
            "allow_internet = false",
            "",
        ]
    )


@dataclass
class Usage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_seconds: float = 0.0


class Cascade:
    """The cascade for one seed (one instance per seed: it holds that seed's files, logs and usage)."""

    def __init__(
        self,
        author: Backend,
        reviewer: Backend,
        env: jinja2.Environment,
        settings: SynthSettings,
        verifier: Verifier,
        seed: Seed,
        work: Path,
    ):
        self.author, self.reviewer, self.env, self.s = author, reviewer, env, settings
        self.verifier, self.seed, self.work = verifier, seed, work
        self.files: dict[str, str] = {}
        self.logs: dict[str, str] = {}
        self.usage = Usage()
        self.review: list[dict] = []  # every round: approve, findings

    def ask(self, backend: Backend, messages: list[dict]) -> str:
        t0 = time.perf_counter()
        comp = backend.complete(messages, seed=self.usage.calls, max_tokens=self.s.max_tokens)
        self.usage.llm_seconds += time.perf_counter() - t0
        self.usage.calls += 1
        self.usage.prompt_tokens += comp.prompt_tokens
        self.usage.completion_tokens += comp.completion_tokens
        return comp.text

    def render(self, name: str, **extra) -> str:
        ctx = {
            "seed": self.seed.to_dict(),
            "files": self.files,
            "logs": self.logs,
            "findings": [],
            "round": 0,
        }
        return self.env.get_template(f"{name}.j2").render(**{**ctx, **extra})

    def stage(self, name: str, **extra) -> dict[str, str]:
        """The stage's files, asked up to `attempts` times; Rejected(stage) with the last answer when none is."""
        required, allowed = STAGES[name]
        messages = [
            {"role": "system", "content": self.env.get_template("system.j2").render(stage=name)},
            {"role": "user", "content": self.render(name, **extra)},
        ]
        errors = []
        for _ in range(self.s.attempts):
            answer = self.ask(self.author, messages)
            try:
                return parse_files(answer, required, allowed)
            except BadAnswer as e:
                errors.append(str(e))
        raise Rejected(name, f"not the requested files in {len(errors)} answers: {'; '.join(errors)}", answer)

    def write(self) -> object:
        """The files so far as a task directory, loaded as a Harbor task (Rejected at `files` when it is not one)."""
        shutil.rmtree(self.work, ignore_errors=True)
        files = {**self.files, "task.toml": task_toml(self.seed, self.s)}
        # before the tests stage: a stand-in that fails (load_harbor requires the file; nothing grades yet)
        files.setdefault("tests/test.sh", "#!/bin/bash\nexit 1\n")
        for path, content in files.items():
            f = self.work / path
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(content)
            if f.suffix == ".sh":
                f.chmod(0o755)
        try:
            return load_harbor(self.work)
        except TaskError as e:
            raise Rejected("files", str(e)) from None

    def reviewed_tests(self) -> None:
        """Tests, reviewed by the second model; its findings cause at most `review_rounds` revisions."""
        self.files.update(self.stage("tests"))
        for rnd in range(self.s.review_rounds + 1):
            messages = [{"role": "user", "content": self.render("review")}]
            errors = []
            for _ in range(self.s.attempts):
                answer = self.ask(self.reviewer, messages)
                try:
                    approve, findings = parse_review(answer)
                    break
                except BadAnswer as e:
                    errors.append(str(e))
            else:
                raise Rejected(
                    "review", f"not a review in {len(errors)} answers: {'; '.join(errors)}", answer
                )
            self.review.append({"round": rnd, "approve": approve, "findings": findings})
            if approve or rnd == self.s.review_rounds:
                return  # open findings stay on record; the sandbox decides
            revised = self.stage("tests", findings=findings, round=rnd + 1)  # it sees the tests it revises
            for path in [p for p in self.files if p.startswith("tests/")]:
                del self.files[path]  # the revision replaces the tests as a whole
            self.files.update(revised)

    def run(self) -> None:
        """Every stage and check; returns when the task is kept, raises Rejected when it is not."""
        self.files.update(self.stage("instruction"))
        self.files.update(self.stage("environment"))
        self.logs["environment"] = self.verifier.build(self.write())
        self.files.update(self.stage("solution"))
        self.logs["solution"] = self.verifier.run_solution(self.write())
        self.reviewed_tests()
        task = self.write()
        self.verifier.round_trip(task)
        self.verifier.attack(task, "nothing")
        self.verifier.attack(task, "empty")
