"""The seeds a synthesis run starts from.

Two kinds, one list: Q&A records from a local JSON-lines file (a StackOverflow-style question with its
accepted answer and its score; those under `synth.min_score` are counted and left out), and domains
with counts from the config (`synth.domains: {name: count}`: that many seeds of the domain). A row
that is not a record (no JSON object, a missing or empty field, a score that is not a number) goes to
the quarantine with its line number and why, and is counted; it never stops the run.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

QA_FIELDS = ("id", "question", "accepted_answer", "score")


@dataclass(frozen=True)
class Seed:
    id: str  # also the task's id: lowercase letters, digits and dashes
    kind: str  # qa | domain
    question: str = ""
    accepted_answer: str = ""
    score: int = 0
    title: str = ""
    domain: str = ""
    tags: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class SeedSet:
    seeds: list[Seed]
    quarantine: list[dict]  # {"file", "line", "reason", "row"}
    below_min_score: list[str]  # ids

    def counts(self) -> dict:
        return {
            "seeds": len(self.seeds),
            "quarantined": len(self.quarantine),
            "below_min_score": len(self.below_min_score),
        }


def task_id(raw: str) -> str:
    """A seed id as a task id (a directory name the sandboxes and the model grammar accept)."""
    out = re.sub(r"[^a-z0-9]+", "-", raw.lower()).strip("-")
    return out[:60] or "seed"


def _qa(obj: dict, prefix: str) -> Seed:
    missing = [k for k in QA_FIELDS if obj.get(k) in (None, "")]
    if missing:
        raise ValueError(f"missing field(s) {', '.join(missing)}")
    score = obj["score"]
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise ValueError(f"score {score!r} is not a number")
    tags = obj.get("tags") or ()
    if not isinstance(tags, (list, tuple)) or not all(isinstance(t, str) for t in tags):
        raise ValueError("tags is not a list of strings")
    return Seed(
        task_id(f"{prefix}{obj['id']}"),
        "qa",
        str(obj["question"]),
        str(obj["accepted_answer"]),
        int(score),
        str(obj.get("title") or ""),
        tags=tuple(tags),
    )


def read_qa(path: str | Path, min_score: int, prefix: str = "so-") -> SeedSet:
    out = SeedSet([], [], [])
    seen: set[str] = set()
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"not JSON ({e})") from None
            if not isinstance(obj, dict):
                raise ValueError("the row is not a JSON object")
            seed = _qa(obj, prefix)
            if seed.id in seen:
                raise ValueError(f"duplicate id {seed.id}")
        except ValueError as e:
            out.quarantine.append({"file": str(path), "line": n, "reason": str(e), "row": line[:500]})
            continue
        seen.add(seed.id)
        (out.seeds if seed.score >= min_score else out.below_min_score).append(
            seed if seed.score >= min_score else seed.id
        )
    return out


def from_domains(domains: dict[str, int]) -> list[Seed]:
    return [
        Seed(task_id(f"{name}-{i}"), "domain", domain=name) for name, n in domains.items() for i in range(n)
    ]


def load_seeds(path: str | Path | None, domains: dict[str, int] | None, min_score: int) -> SeedSet:
    """Every seed of a run: the Q&A file's (when given), then the domains' (ids must not collide)."""
    out = read_qa(path, min_score) if path else SeedSet([], [], [])
    ids = {s.id for s in out.seeds}
    for s in from_domains(domains or {}):
        if s.id in ids:
            raise ValueError(f"synth.domains: seed id {s.id} is also a Q&A seed's id")
        out.seeds.append(s)
    return out
