"""Reference log-probs, precomputed once per trajectory of the pairs, so that DMPO training holds one model.

For every trajectory of pairs.parquet: log pi_ref of each assistant turn = the sum of its tokens'
teacher-forced log-probs, from the scorer's memory-safe path (trunk once, LM head and fp32
log-softmax over the assistant positions only, `chunk` at a time: never a [T, vocab] tensor).

reference.parquet (`traj`, `n_turns`, `logps`) records in its metadata the sha256 of the reference
model's weights and config and of the pairs file it was computed from; training refuses a file
whose recorded model is not its starting point, or whose pairs are not its pairs. The job is
resumable: finished trajectories are appended to a partial JSONL next to the output (discarded if
it was written under another model).
"""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from horizon.dmpo.pairs import SIDES, assistant_turn_ids, list_column, side_rows
from horizon.io import Journal, model_files, write_table
from horizon.progress import Progress

log = logging.getLogger("horizon.dmpo.ref_logprobs")

SCHEMA = pa.schema([("traj", pa.string()), ("n_turns", pa.int32()), ("logps", pa.list_(pa.float64()))])


def file_sha256(path: str | Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def model_sha256(model_dir: str | Path) -> str:
    """sha256 over the names and contents of a model directory's weight files and config.json."""
    d = Path(model_dir)
    files = model_files(d)
    if not files:
        raise FileNotFoundError(f"{d}: not a model directory (no config.json or no weight files)")
    h = hashlib.sha256()
    for p in files:
        h.update(p.name.encode() + b"\0" + file_sha256(p).encode() + b"\n")
    return h.hexdigest()


def trajectories(pairs_path: str | Path) -> dict[str, dict]:
    """traj -> {input_ids, turn_ids, n_turns}: each trajectory of the pairs once."""
    table = pq.read_table(pairs_path)
    out: dict[str, dict] = {}
    for side in SIDES:
        for traj, ids, roles, turns in side_rows(table, side):
            if traj not in out:
                turn_ids = assistant_turn_ids(roles, turns)
                out[traj] = {"input_ids": ids, "turn_ids": turn_ids, "n_turns": int(turn_ids.max()) + 1}
    return out


def per_turn(token_logps: np.ndarray, turn_ids: np.ndarray, n_turns: int) -> np.ndarray:
    """Sum of the assistant tokens' log-probs per turn (token_logps in position order of turn_ids >= 0)."""
    return np.bincount(turn_ids[turn_ids >= 0], weights=token_logps, minlength=n_turns)


def _journal(out_path: Path, model_hash: str, pairs_hash: str) -> tuple[Journal, dict[str, list]]:
    """The partial file and what it holds; a partial written under another model or pairs is discarded."""
    journal = Journal(out_path.with_name(f".{out_path.stem}.partial.jsonl"))
    recs = journal.read()
    head = {"model_sha256": model_hash, "pairs_sha256": pairs_hash}
    if recs and {k: recs[0].get(k) for k in head} != head:
        log.warning("%s: partial results of another model or pairs, discarded", journal.path)
        journal.remove()
        journal = Journal(journal.path)
        recs = []
    if not recs:
        journal.append([head])
    return journal, {r["traj"]: r["logps"] for r in recs[1:]}


def compute_reference(
    pairs_path: str | Path,
    model_dir: str | Path,
    out_path: str | Path,
    chunk: int = 512,
    device: str | None = None,
) -> dict:
    from horizon.score.scorer import Scorer

    t0 = time.time()
    out_path = Path(out_path)
    model_hash, pairs_hash = model_sha256(model_dir), file_sha256(pairs_path)
    trajs = trajectories(pairs_path)
    journal, done = _journal(out_path, model_hash, pairs_hash)
    todo = [t for t in trajs if t not in done]
    progress = Progress("reference log-probs", len(trajs), "trajectories", logger=log)
    progress.update(len(done))
    if todo:
        scorer = Scorer(model_dir, device=device, chunk=chunk)
        for traj in todo:
            r = trajs[traj]
            targets = r["turn_ids"] >= 0
            lp = scorer.logprobs(r["input_ids"][None], targets[None])[0]
            logps = per_turn(lp, r["turn_ids"], r["n_turns"])
            if not np.isfinite(logps).all():
                raise FloatingPointError(f"trajectory {traj}: reference log-prob {logps} under {model_dir}")
            journal.append([{"traj": traj, "logps": logps.tolist()}])
            done[traj] = logps.tolist()
            progress.update(1, tokens=len(r["input_ids"]))
    progress.close()
    rows = [{"traj": t, "n_turns": trajs[t]["n_turns"], "logps": done[t]} for t in sorted(trajs)]
    meta = {
        "model_sha256": model_hash,
        "pairs_sha256": pairs_hash,
        "model_dir": str(model_dir),
        "seconds": f"{time.time() - t0:.3f}",
    }
    table = pa.Table.from_pylist(rows, schema=SCHEMA).replace_schema_metadata(meta)
    write_table(out_path, table)
    journal.remove()
    log.info(
        "reference log-probs of %d trajectories under %s (sha256 %s)", len(rows), model_dir, model_hash[:12]
    )
    return {"trajectories": len(rows), **meta}


def reference_meta(path: str | Path) -> dict[str, str]:
    meta = pq.read_schema(path).metadata or {}
    return {k.decode(): v.decode() for k, v in meta.items()}


def load_reference(path: str | Path, model_dir: str | Path, pairs_path: str | Path) -> dict[str, np.ndarray]:
    """traj -> per-turn reference log-probs, after checking that they belong to this model and these pairs."""
    meta = reference_meta(path)
    if "model_sha256" not in meta:
        raise ValueError(f"{path}: no recorded reference model hash; recompute it (the dmpo_reference rule)")
    want = model_sha256(model_dir)
    if meta["model_sha256"] != want:
        raise ValueError(
            f"{path}: reference log-probs of another model (recorded sha256 {meta['model_sha256'][:16]}, from "
            f"{meta.get('model_dir')}); the DMPO starting point {model_dir} has sha256 {want[:16]}: recompute "
            "them (the dmpo_reference rule)"
        )
    if meta.get("pairs_sha256") != file_sha256(pairs_path):
        raise ValueError(f"{path}: computed for other pairs than {pairs_path}; recompute them")
    table = pq.read_table(path)
    ref = {
        t: np.asarray(v, np.float64)
        for t, v in zip(table.column("traj").to_pylist(), list_column(table, "logps"))
    }
    for traj, r in trajectories(pairs_path).items():
        if traj not in ref or len(ref[traj]) != r["n_turns"]:
            raise ValueError(f"{path}: trajectory {traj} is missing or has another number of turns")
    return ref
