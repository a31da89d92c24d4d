"""The LLM-judge filter: every trajectory scored by a model behind any OpenAI-compatible endpoint.

A rubric file (YAML) names the criteria and the score scale; the judge answers one JSON object with
an integer score per criterion and whether the *agent* refused the task. A trajectory is kept when
the mean score is at least `judge.keep` and the agent did not refuse.

- HTTP through the `openai` client: its own retries with backoff (connection errors, timeouts, 408,
  409, 429 honouring Retry-After, 5xx; `judge.max_retries`) and timeout (`judge.timeout_s`).
- An answer that is not a valid verdict (no JSON, a missing criterion, a score off the scale, or the
  judge refusing to grade) is recorded and asked again, `judge.attempts` times in all; then the
  trajectory is counted as unjudged (`malformed` or `judge_refused`), never a crash.
- An endpoint that refuses the requests (401, 403, 404, 400) or stays unreachable after the
  client's retries stops the stage with an error naming it and the counts so far.
- Resumable per trajectory: every finished trajectory (its raw answers included) is appended at once
  to judge.partial.jsonl (horizon.io.Journal); a rerun skips them. judge.parquet appears when all
  trajectories are judged.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from horizon.io import Journal, iter_batches, write_table
from horizon.progress import Progress
from horizon.terminus import answer_view

log = logging.getLogger("horizon.data.judge")

JUDGE_REFUSAL = re.compile(
    r"(?i)\b(?:I(?:'m| am) (?:sorry|unable|not able)|I can(?:not|'t|’t) (?:help|assist|comply|evaluate|grade)"
    r"|I won(?:'|’)t (?:help|assist)|as an AI\b)"
)
JUDGE_SCHEMA = pa.schema(
    [
        ("traj_id", pa.string()),
        ("status", pa.string()),  # judged | malformed | judge_refused
        ("score", pa.float64()),  # mean over the criteria (judged only)
        ("scores", pa.string()),  # JSON {criterion: score}
        ("refusal", pa.bool_()),  # the agent refused the task
        ("attempts", pa.int32()),
        ("answers", pa.string()),  # JSON list of the judge's raw answers
        ("reason", pa.string()),  # why the filter removes it (null: kept)
        ("detail", pa.string()),
    ]
)


class JudgeError(RuntimeError):
    """The judge cannot run (a bad rubric, an endpoint that refuses or is gone); the message names it."""


@dataclass
class Rubric:
    criteria: dict[str, str]
    low: int
    high: int
    instructions: str = ""
    digest: str = ""

    @classmethod
    def load(cls, path: str | Path) -> Rubric:
        text = Path(path).read_text()
        data = yaml.safe_load(text) or {}
        criteria = data.get("criteria")
        if (
            not isinstance(criteria, dict)
            or not criteria
            or not all(isinstance(v, str) for v in criteria.values())
        ):
            raise JudgeError(f"judge rubric {path}: `criteria` must map each criterion to what it means")
        scale = data.get("scale")
        if not isinstance(scale, dict) or not all(isinstance(scale.get(k), int) for k in ("min", "max")):
            raise JudgeError(f"judge rubric {path}: no score scale (expected `scale: {{min: 1, max: 5}}`)")
        if scale["min"] >= scale["max"]:
            raise JudgeError(f"judge rubric {path}: scale.min must be below scale.max")
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        return cls(dict(criteria), scale["min"], scale["max"], str(data.get("instructions") or ""), digest)

    def system_prompt(self) -> str:
        lines = [
            self.instructions.strip(),
            "",
            f"Score each criterion from {self.low} (worst) to {self.high} (best):",
        ]
        lines += [f"- {name}: {meaning}" for name, meaning in self.criteria.items()]
        keys = ", ".join(f'"{c}": <integer>' for c in self.criteria)
        lines += [
            "",
            "Also say whether the agent refused or abandoned the task instead of attempting it.",
            f'Answer with one JSON object only: {{"scores": {{{keys}}}, "refusal": <true|false>, '
            '"reason": "<one sentence>"}',
        ]
        return "\n".join(lines).strip()


class Malformed(ValueError):
    """The answer is not a verdict; `kind` is malformed or judge_refused."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def parse_verdict(answer: str, rubric: Rubric) -> tuple[dict[str, int], bool]:
    """(scores, agent refused) from a judge answer; Malformed when it is not a verdict."""
    text = answer_view(answer or "")  # what follows the reasoning
    start = text.find("{")
    if start == -1:
        kind = "judge_refused" if JUDGE_REFUSAL.search(text) else "malformed"
        raise Malformed(kind, "no JSON object in the answer")
    try:
        obj, _ = json.JSONDecoder().raw_decode(text, start)  # the first JSON value from the first brace
    except json.JSONDecodeError as e:
        raise Malformed("malformed", f"invalid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise Malformed("malformed", "the answer's JSON is not an object")
    scores = obj.get("scores")
    if not isinstance(scores, dict):
        raise Malformed("malformed", "no `scores` object")
    out = {}
    for c in rubric.criteria:
        v = scores.get(c)
        if isinstance(v, bool) or not isinstance(v, int) or not rubric.low <= v <= rubric.high:
            raise Malformed(
                "malformed", f"criterion {c!r}: {v!r} is not an integer in {rubric.low}..{rubric.high}"
            )
        out[c] = v
    refusal = obj.get("refusal", False)
    if not isinstance(refusal, bool):
        raise Malformed("malformed", "`refusal` is not a boolean")
    return out, refusal


def render_trajectory(conversation: Sequence[Mapping[str, str]], max_chars: int) -> str:
    """The trajectory as text for the judge, its middle cut when longer than max_chars."""
    text = "".join(f"### {m['role']} (turn {i})\n{m['content']}\n\n" for i, m in enumerate(conversation))
    if len(text) <= max_chars:
        return text
    half = max_chars // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters omitted ...]\n{text[-half:]}"


# keys of config `judge:` that JudgeSettings does not carry, and where they go
JUDGE_KEYS_ELSEWHERE = {
    "enabled": "the grid (the judge rule exists or not)",
    "rubric": "a rule input: the rubric file",
}


@dataclass
class JudgeSettings:
    """config `judge:` as validated (the schema's defaults filled; none here), minus JUDGE_KEYS_ELSEWHERE."""

    endpoint: str
    model: str
    keep: float
    concurrency: int
    attempts: int  # answers asked per trajectory before it is counted unjudged
    max_retries: int  # HTTP retries of the openai client per request
    timeout_s: float
    max_tokens: int
    temperature: float
    max_chars: int
    api_key_env: str
    unjudged: str  # drop | keep

    @classmethod
    def from_config(cls, judge_cfg: Mapping) -> JudgeSettings:
        """From config's validated `judge:` section (a missing key is an error naming it)."""
        from horizon.config import record_from

        return record_from(cls, judge_cfg, "judge")

    @property
    def url(self) -> str:
        root = self.endpoint.rstrip("/")
        return root if root.endswith("/v1") else root + "/v1"


@dataclass
class Judge:
    settings: JudgeSettings
    rubric: Rubric
    client: object = field(init=False, repr=False)

    def __post_init__(self):
        import openai

        s = self.settings
        key = os.environ.get(s.api_key_env) or "none"
        self.client = openai.OpenAI(
            base_url=s.url, api_key=key, max_retries=s.max_retries, timeout=s.timeout_s
        )

    def ask(self, text: str) -> str:
        """One answer of the judge (the client retries the HTTP); JudgeError when the endpoint refuses or is gone."""
        import openai

        s = self.settings
        try:
            out = self.client.chat.completions.create(
                model=s.model,
                temperature=s.temperature,
                max_tokens=s.max_tokens,
                messages=[
                    {"role": "system", "content": self.rubric.system_prompt()},
                    {"role": "user", "content": text},
                ],
            )
        except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as e:
            raise JudgeError(
                f"judge endpoint {s.url}: {type(e).__name__} after {s.max_retries} retries: {e}"
            ) from None
        except openai.APIStatusError as e:
            raise JudgeError(
                f"judge endpoint {s.url} refused the request ({e.status_code}): {e.message}"
            ) from None
        choice = out.choices[0] if out.choices else None
        if choice is None or choice.finish_reason == "content_filter":
            return "I'm sorry, the content filter stopped this answer."
        return choice.message.content or ""

    def judge(self, traj_id: str, conversation: Sequence[Mapping[str, str]]) -> dict:
        """The journal record of one trajectory: its verdict, or why there is none, with every answer."""
        text = render_trajectory(conversation, self.settings.max_chars)
        answers, kind, error = [], "malformed", ""
        for _ in range(self.settings.attempts):
            answers.append(self.ask(text))
            try:
                scores, refusal = parse_verdict(answers[-1], self.rubric)
            except Malformed as e:
                kind, error = e.kind, str(e)
                continue
            score = sum(scores.values()) / len(scores)
            return {
                "traj_id": traj_id,
                "status": "judged",
                "score": score,
                "scores": scores,
                "refusal": refusal,
                "answers": answers,
                "error": "",
            }
        return {
            "traj_id": traj_id,
            "status": kind,
            "score": None,
            "scores": None,
            "refusal": None,
            "answers": answers,
            "error": error,
        }


def _trajectories(
    path: str | Path, skip: Mapping[str, dict], batch_rows: int = 64
) -> Iterator[tuple[str, list]]:
    for batch in iter_batches(path, ["traj_id", "conversations"], batch_rows):
        for r in batch.to_pylist():
            if r["traj_id"] not in skip:
                yield r["traj_id"], r["conversations"]


class _Run:
    """Judged records so far (from the journal and this run) and the first fatal error."""

    def __init__(self, journal: Journal, tag: dict, done: dict[str, dict], progress: Progress):
        self.journal, self.tag, self.done, self.progress = journal, tag, done, progress
        self.failure: str | None = None

    def collect(self, finished: set[Future]) -> None:
        for f in finished:
            if f.cancelled():
                continue
            if isinstance(f.exception(), JudgeError):
                self.failure = self.failure or str(f.exception())
                continue
            rec = {**f.result(), "tag": self.tag}  # any other exception is a bug: raised here
            self.journal.append([rec])
            self.done[rec["traj_id"]] = rec
            self.progress.update(1)


def verdict_row(rec: dict, settings: JudgeSettings) -> dict:
    """A judge.parquet row: the record and why the filter removes the trajectory (reason null: kept)."""
    reason = detail = None
    if rec["status"] != "judged":
        if settings.unjudged == "drop":
            reason = f"unjudged_{rec['status']}"
            detail = f"no verdict in {len(rec['answers'])} answers: {rec['error']}"
    elif rec["refusal"]:
        reason, detail = "refusal", "the judge found that the agent refused or abandoned the task"
    elif rec["score"] < settings.keep:
        reason, detail = "judge_below_threshold", f"score {rec['score']:.2f} < judge.keep {settings.keep}"
    return {
        "traj_id": rec["traj_id"],
        "status": rec["status"],
        "score": rec["score"],
        "scores": json.dumps(rec["scores"]),
        "refusal": rec["refusal"],
        "attempts": len(rec["answers"]),
        "answers": json.dumps(rec["answers"]),
        "reason": reason,
        "detail": detail,
    }


def run_judge(
    trajectories: str | Path,
    rubric_path: str | Path,
    out_path: str | Path,
    stats_path: str | Path,
    settings: JudgeSettings,
) -> dict:
    """Judge every trajectory (resuming from judge.partial.jsonl); write judge.parquet and its counts."""
    import time

    rubric = Rubric.load(rubric_path)
    if not rubric.low <= settings.keep <= rubric.high:
        raise JudgeError(
            f"config key judge.keep: {settings.keep} is outside the scale {rubric.low}..{rubric.high} "
            f"of the rubric {rubric_path}"
        )
    out_path = Path(out_path)
    journal = Journal(out_path.with_name("judge.partial.jsonl"))
    tag = {"model": settings.model, "rubric": rubric.digest, "max_chars": settings.max_chars}
    records = journal.read()
    done = {r["traj_id"]: r for r in records if r.get("tag") == tag}
    if len(done) < len(records):
        log.warning(
            "judge: %d journal records of another model or rubric are judged again", len(records) - len(done)
        )
    order = pq.read_table(trajectories, columns=["traj_id"]).column("traj_id").to_pylist()
    progress = Progress("judge", len(order) - len(done), "trajectories", logger=log)
    run, judge, t0 = _Run(journal, tag, done, progress), Judge(settings, rubric), time.perf_counter()
    with ThreadPoolExecutor(settings.concurrency) as pool, journal:
        inflight: set[Future] = set()
        for traj_id, conversation in _trajectories(trajectories, dict(done)):
            if len(inflight) >= 2 * settings.concurrency:
                finished, inflight = wait(inflight, return_when=FIRST_COMPLETED)
                run.collect(finished)
            if run.failure:
                break
            inflight.add(pool.submit(judge.judge, traj_id, conversation))
        if run.failure:
            for f in inflight:
                f.cancel()
        run.collect(wait(inflight)[0])
    progress.close()
    if run.failure:
        raise JudgeError(
            f"{run.failure}; {len(done)} of {len(order)} trajectories judged, kept in {journal.path}: "
            "rerun to resume"
        )
    return _write(order, done, settings, rubric, out_path, stats_path, time.perf_counter() - t0)


def _write(order, done, settings, rubric, out_path, stats_path, seconds) -> dict:
    from collections import Counter

    from horizon.io import write_json

    rows = [verdict_row(done[t], settings) for t in order]
    write_table(out_path, pa.Table.from_pylist(rows, schema=JUDGE_SCHEMA))
    answers = sum(r["attempts"] for r in rows)
    stats = {
        "trajectories": len(rows),
        "status": dict(Counter(r["status"] for r in rows)),
        "removed": dict(Counter(r["reason"] for r in rows if r["reason"])),
        "kept": sum(1 for r in rows if not r["reason"]),
        "answers": answers,
        "answers_not_a_verdict": answers - sum(1 for r in rows if r["status"] == "judged"),
        "model": settings.model,
        "endpoint": settings.url,
        "rubric": rubric.digest,
        "keep": settings.keep,
        "seconds_this_run": seconds,
    }
    write_json(stats_path, stats)
    log.info("judge: %d trajectories, %s; removed %s", len(rows), stats["status"], stats["removed"])
    return stats
