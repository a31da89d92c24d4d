"""What finished jobs measured, for `horizon plan --from-results`: each figure replaces its assumption.

Lengths from the token shards (and the held-out list), pools from the pool files, training tokens/s
from every timing.json (tokens seen / (wall seconds x world size)), scoring and tokenize tokens/s
from Snakemake's benchmark files of finished jobs, seconds per attempt from the attempt records
(infrastructure errors excluded), task counts from the benchmarks' tasks.json.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from horizon.report.plan_inputs import Lengths, Pool, Profile, Rates


def _job_seconds(timing_dir: Path, pattern: str) -> list[float]:
    """Seconds of finished jobs from Snakemake's benchmark files (results/logs/timing/...)."""
    import csv

    out = []
    for tsv in sorted(timing_dir.glob(pattern)):
        with open(tsv, newline="") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        if rows:
            out.append(float(rows[0]["s"]))
    return out


def _measured_lengths(cfg: Mapping, results: Path, rates: Rates, out: dict) -> Lengths | None:
    import pyarrow.parquet as pq

    shards = sorted((results / "tokens").glob("shard-*.parquet"))
    if len(shards) != cfg["tokenize"]["shards"]:
        return None
    n = np.concatenate([pq.read_table(p, columns=["n_tokens"]).column("n_tokens").to_numpy() for p in shards])
    seconds = _job_seconds(results / "logs" / "timing" / "tokens", "tokenize/shard-*.tsv")
    if len(seconds) == len(shards):
        rates.tokenize = float(n.sum()) / sum(seconds)
        rates.sources["tokenize"] = f"{rates.tokenize:,.0f} tokens/s per job, measured ({len(seconds)} jobs)"
    heldout = results / "horizons" / "heldout.parquet"
    if heldout.exists():
        out["heldout"] = pq.read_table(heldout, columns=["n_tokens"]).column("n_tokens").to_numpy()
    return Lengths(len(n), measured=n.astype(np.int64), source=f"measured ({len(shards)} token shards)")


def _measured_training(results: Path, rates: Rates, out: dict) -> None:
    timings = {
        d.name: json.loads((d / "timing.json").read_text())
        for d in sorted((results / "models").glob("*"))
        if (d / "timing.json").exists()
    }
    out["timings"] = timings
    busy = sum(t["wall_seconds"] * t["world_size"] for t in timings.values())
    if busy:
        rates.train = sum(t["tokens_seen"] for t in timings.values()) / busy
        devices = sorted({t["device"] for t in timings.values()})
        rates.sources["train"] = (
            f"{rates.train:,.0f} tokens/s per process, measured ({len(timings)} timing.json on "
            f"{', '.join(devices)})"
        )


def _measured_scoring(cfg: Mapping, results: Path, rates: Rates, out: dict, prof: Profile) -> None:
    import pyarrow.parquet as pq

    h1, pools, tokens, busy = cfg["refine"]["h1"], {}, 0.0, 0.0
    for h2 in cfg["refine"]["h2"]:
        path = results / "horizons" / f"pool-H{h1}-{h2}.parquet"
        if not path.exists():
            continue
        t = pq.read_table(path, columns=["n_tokens", "n_window_tokens"])
        n = t.column("n_tokens").to_numpy()
        pool = Pool(
            len(n),
            float(np.count_nonzero(t.column("n_window_tokens").to_numpy())),
            float(np.minimum(n, h2).sum()),
        )
        pools[h2] = pool
        seconds = _job_seconds(results / "logs" / "timing" / "score", f"score/H{h1}-{h2}/shard-*.tsv")
        if len(seconds) == cfg["score"]["shards"]:
            tokens, busy = tokens + pool.tokens, busy + sum(seconds) * max(prof.score_gpus, 1)
    out["pools"] = pools
    if busy:
        rates.score = tokens / busy
        per = "GPU" if prof.score_gpus else "job"
        rates.sources["score"] = f"{rates.score:,.0f} tokens/s per {per}, measured (finished scoring shards)"


def _measured_rollouts(cfg: Mapping, results: Path, rates: Rates, out: dict) -> None:
    from horizon.report.metrics import read_attempts

    out["tasks"] = {}
    for b in cfg["eval"]["benchmarks"]:
        manifest = results / "benchmarks" / b / "tasks.json"
        if manifest.exists():
            out["tasks"][b] = len(json.loads(manifest.read_text())["tasks"])
        files = [
            *results.glob(f"rollouts/*/{b}/r*/attempts.jsonl"),
            *results.glob(f"rollouts/*/{b}/r*/attempts.partial.jsonl"),
        ]
        seconds = [
            r["seconds"]
            for f in files
            for r in read_attempts(f)
            if r.get("failure_mode") not in ("infra_error", "unsupported")
        ]
        if seconds:
            rates.rollout_s[b] = float(np.mean(seconds))
            rates.sources[f"rollout {b}"] = (
                f"{rates.rollout_s[b]:,.0f} s per attempt, measured ({len(seconds)} attempts)"
            )
    if all(f"rollout {b}" in rates.sources for b in cfg["eval"]["benchmarks"]):
        rates.sources.pop("rollout", None)  # no benchmark uses the assumption any more


def from_results(cfg: Mapping, results: Path, lengths: Lengths, rates: Rates, prof: Profile):
    """(lengths, rates, measured) with every figure that finished jobs measured in place of its assumption."""
    out: dict = {}
    lengths = _measured_lengths(cfg, results, rates, out) or lengths
    _measured_training(results, rates, out)
    _measured_scoring(cfg, results, rates, out, prof)
    _measured_rollouts(cfg, results, rates, out)
    return lengths, rates, out
