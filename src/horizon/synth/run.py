"""A synthesis run: every seed through the cascade, resumable per seed; Harbor tasks and rejections out.

Outputs under the run's directory: tasks/<id>/ (kept tasks, Harbor layout), tasks.json (their
manifest, what rollouts and `collect` read as a benchmark), rejections.jsonl (one record per rejected
seed: stage, reason, the raw answer or execution log), quarantine.jsonl (seed rows that are not
records, with line numbers), funnel.json (how many seeds reached each stage; LLM and sandbox times).
Every finished seed is appended at once to synth.partial.jsonl (horizon.io.Journal); a rerun skips
the seeds recorded there under the same models, prompts and review rounds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path

from horizon.eval.models.backends import Backend, BackendError
from horizon.eval.tasks.benchmark import write_manifest
from horizon.io import Journal, atomic_path, write_json
from horizon.synth.cascade import FUNNEL, Cascade, SynthSettings, prompts
from horizon.synth.seeds import Seed, SeedSet
from horizon.synth.verify import Rejected, Verifier

log = logging.getLogger("horizon.synth")


class SynthError(RuntimeError):
    """The run cannot go on (an endpoint down, no task kept); the message names it and what is kept."""


def prompts_digest(directory: str | Path) -> str:
    h = hashlib.sha256()
    for f in sorted(Path(directory).glob("*.j2")):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def one_seed(
    seed: Seed,
    author: Backend,
    reviewer: Backend,
    env,
    settings: SynthSettings,
    verifier_kind: str,
    options: dict,
    out: Path,
) -> dict:
    """The journal record of one seed (accepted: its task is in tasks/<id>/). BackendError propagates."""
    t0 = time.perf_counter()
    verifier = Verifier(verifier_kind, options)
    c = Cascade(author, reviewer, env, settings, verifier, seed, out / "work" / seed.id)
    rec = {"seed": seed.id, "kind": seed.kind, "status": "accepted", "stage": "kept", "reason": "", "log": ""}
    try:
        c.run()
        dest = out / "tasks" / seed.id
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        c.work.rename(dest)
    except Rejected as e:
        rec.update(status="rejected", stage=e.stage, reason=e.reason, log=e.log)
    rec.update(
        review=c.review,
        usage=asdict(c.usage),
        sandbox_seconds=verifier.timings,
        seconds=round(time.perf_counter() - t0, 3),
    )
    rec["usage"]["llm_seconds"] = round(rec["usage"]["llm_seconds"], 3)
    return rec


def funnel(records: list[dict], seeds: SeedSet) -> dict:
    """How many seeds passed each stage (in FUNNEL order), with the rejections by stage and reason."""
    rank = {s: i for i, s in enumerate(FUNNEL)}
    passed = {s: sum(1 for r in records if rank[r["stage"]] > rank[s]) for s in FUNNEL[:-1]}
    rejected: dict[str, int] = {}
    for r in records:
        if r["status"] == "rejected":
            rejected[r["stage"]] = rejected.get(r["stage"], 0) + 1
    stage_s = {
        k: round(sum(r["sandbox_seconds"].get(k, 0.0) for r in records), 3)
        for k in ("build", "solution", "tests", "attack")
    }
    return {
        **seeds.counts(),
        "processed": len(records),
        "passed": passed,
        "rejected": rejected,
        "kept": sum(1 for r in records if r["status"] == "accepted"),
        "llm_calls": sum(r["usage"]["calls"] for r in records),
        "prompt_tokens": sum(r["usage"]["prompt_tokens"] for r in records),
        "completion_tokens": sum(r["usage"]["completion_tokens"] for r in records),
        "llm_seconds": round(sum(r["usage"]["llm_seconds"] for r in records), 3),
        "sandbox_seconds": stage_s,
        "seconds": round(sum(r["seconds"] for r in records), 3),
    }


def synthesize(
    seeds: SeedSet,
    author: Backend,
    reviewer: Backend,
    settings: SynthSettings,
    prompts_dir,
    out_dir,
    verifier_kind: str = "local",
    options: dict | None = None,
    concurrency: int = 2,
) -> dict:
    out = Path(out_dir)
    env, tag = prompts(prompts_dir), settings.tag(prompts_digest(prompts_dir))
    journal = Journal(out / "synth.partial.jsonl")
    done = {r["seed"]: r for r in journal.read() if r.get("tag") == tag}
    todo = [s for s in seeds.seeds if s.id not in done]
    log.info(
        "synth: %d seeds (%d done before), %d quarantined, %d below min_score",
        len(seeds.seeds),
        len(seeds.seeds) - len(todo),
        len(seeds.quarantine),
        len(seeds.below_min_score),
    )
    failure = None
    with journal, ThreadPoolExecutor(concurrency) as pool:
        futures = {
            pool.submit(one_seed, s, author, reviewer, env, settings, verifier_kind, options or {}, out): s
            for s in todo
        }
        for f in as_completed(futures):
            if f.cancelled():
                continue
            if isinstance(f.exception(), BackendError):
                failure = failure or f"{futures[f].id}: {f.exception()}"
                for g in futures:
                    g.cancel()
                continue
            rec = {**f.result(), "tag": tag}
            journal.append([rec])
            done[rec["seed"]] = rec
            log.info(
                "synth %s: %s%s", rec["seed"], rec["stage"], f" ({rec['reason']})" if rec["reason"] else ""
            )
    if failure:
        raise SynthError(
            f"the endpoint failed ({failure}); {len(done)} of {len(seeds.seeds)} seeds are finished "
            f"and kept in {journal.path}: rerun to resume"
        )
    return write_outputs([done[s.id] for s in seeds.seeds], seeds, out)


def write_outputs(records: list[dict], seeds: SeedSet, out: Path) -> dict:
    with atomic_path(out / "rejections.jsonl") as tmp, open(tmp, "w") as fh:
        for r in records:
            if r["status"] == "rejected":
                fh.write(
                    json.dumps({k: r[k] for k in ("seed", "kind", "stage", "reason", "log", "review")}) + "\n"
                )
    with atomic_path(out / "quarantine.jsonl") as tmp, open(tmp, "w") as fh:
        fh.writelines(json.dumps(q) + "\n" for q in seeds.quarantine)
    stats = funnel(records, seeds)
    write_json(out / "funnel.json", stats)
    kept = [r["seed"] for r in records if r["status"] == "accepted"]
    if not kept:
        raise SynthError(
            f"synth: no task kept of {len(records)} seeds (rejected by stage: {stats['rejected']}; "
            f"see {out / 'rejections.jsonl'})"
        )
    write_manifest(out / "tasks", "harbor", out / "tasks.json", only=kept, name="synth")
    log.info("synth: kept %d of %d seeds; rejected by stage %s", len(kept), len(records), stats["rejected"])
    return stats
