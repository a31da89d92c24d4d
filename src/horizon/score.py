"""Teacher-forced log-probabilities under a model, without ever materialising [T, vocab] logits.

score_i = mean over the supervised (assistant) tokens x_t at positions t in (H1, H2] of
log p_theta1(x_t | x_<t). The trunk runs over positions 1..H2 once; the LM head and the
log-softmax run only on the hidden states that predict window tokens, `chunk` positions at a
time (Qwen3's vocabulary is 151,936: 16K positions of fp32 logits would be ~10 GB).

Scoring shards are independent and resumable: finished rows are appended to a partial JSONL file
next to the shard (not a Snakemake output, so a killed job keeps it), and the shard's parquet
appears only when every row of the shard is scored.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from horizon.io import write_table
from horizon.progress import Progress

log = logging.getLogger("horizon.score")

SCORES_SCHEMA = pa.schema(
    [("traj_id", pa.string()), ("score", pa.float64()), ("n_window_tokens", pa.int32())]
)


class Scorer:
    """Per-token log-probs of chosen target positions, chunked over the LM head."""

    def __init__(
        self,
        model_dir: str | Path,
        device: str | None = None,
        chunk: int = 512,
        dtype=None,
        attn_implementation: str = "sdpa",
    ):
        import torch
        from transformers import AutoModelForCausalLM

        self.torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if dtype is None:
            dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        self.model = AutoModelForCausalLM.from_pretrained(
            str(model_dir), dtype=dtype, attn_implementation=attn_implementation
        ).to(self.device)
        self.model.eval()
        self.trunk = self.model.get_decoder()
        self.head = self.model.get_output_embeddings()
        self.chunk = chunk

    def logprobs(self, ids: np.ndarray, targets: np.ndarray) -> list[np.ndarray]:
        """ids [B, T] int, targets [B, T] bool (position 0 never a target) -> per row, log p of its targets.

        Rows must share one length T (the scorer feeds equal-length batches: no padding, no mask).
        """
        torch = self.torch
        if targets[:, 0].any():
            raise ValueError("position 0 has no context and cannot be a target")
        with torch.inference_mode():
            x = torch.as_tensor(np.asarray(ids, dtype=np.int64), device=self.device)
            hidden = self.trunk(input_ids=x).last_hidden_state  # [B, T, d]: the only full-length tensor
            rows, cols = np.nonzero(targets)
            out_flat = np.empty(len(rows), dtype=np.float64)
            for s in range(0, len(rows), self.chunk):
                r = torch.as_tensor(rows[s : s + self.chunk], device=self.device)
                c = torch.as_tensor(cols[s : s + self.chunk], device=self.device)
                out_flat[s : s + len(r)] = (
                    _target_logprobs(self.head(hidden[r, c - 1]), x[r, c]).cpu().numpy()
                )
        counts = targets.sum(axis=1)
        return np.split(out_flat, np.cumsum(counts)[:-1])


def _target_logprobs(logits, targets):
    """log_softmax(logits)[i, targets[i]] in fp32, with one [chunk, vocab] fp32 buffer worked in place."""
    import torch

    picked = logits.gather(1, targets.unsqueeze(1)).squeeze(1).double()
    z = logits.float()  # the model-dtype logits are released here
    del logits
    m = z.amax(dim=1, keepdim=True)
    lse = z.sub_(m).exp_().sum(dim=1).log_().double() + m.squeeze(1).double()
    return (picked - lse).to(torch.float64)


def window_targets(roles: np.ndarray, h1: int, h2: int) -> np.ndarray:
    """Supervised positions t with H1 < t <= H2 (1-based), i.e. 0-based indices H1..H2-1."""
    mask = np.zeros(h2, dtype=bool)
    mask[h1:h2] = roles[h1:h2] == 1
    return mask


def _partial_path(out_path: Path) -> Path:
    return out_path.with_name(f".{out_path.stem}.partial.jsonl")


def _read_partial(path: Path) -> dict[str, dict]:
    done: dict[str, dict] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                break  # a line cut by the kill: everything before it is complete
            done[rec["traj_id"]] = rec
    return done


def load_rows(token_shards: Sequence[str | Path], traj_ids: set[str], length: int) -> dict[str, tuple]:
    """(input_ids[:length], roles[:length]) for the requested trajectories."""
    out = {}
    for p in token_shards:
        pf = pq.ParquetFile(p)
        for batch in pf.iter_batches(batch_size=64, columns=["traj_id", "input_ids", "roles"]):
            tids = batch.column("traj_id").to_pylist()
            for i, tid in enumerate(tids):
                if tid in traj_ids:
                    ids = batch.column("input_ids")[i].values.to_numpy(zero_copy_only=False)[:length]
                    roles = batch.column("roles")[i].values.to_numpy(zero_copy_only=False)[:length]
                    out[tid] = (ids, roles)
    return out


def score_shard(
    pool_path: str | Path,
    token_shards: Sequence[str | Path],
    model_dir: str | Path,
    out_path: str | Path,
    h1: int,
    h2: int,
    shard: int,
    n_shards: int,
    chunk: int = 512,
    batch_tokens: int = 65536,
    write_every: int = 64,
    device: str | None = None,
) -> dict:
    out_path = Path(out_path)
    pool = pq.read_table(pool_path).to_pylist()
    mine = pool[shard::n_shards]  # the pool is sorted by length: every n-th row balances the shards
    partial = _partial_path(out_path)
    done = _read_partial(partial)
    todo = [r for r in mine if r["traj_id"] not in done]
    if done:
        log.info("shard %d: resuming, %d of %d trajectories already scored", shard, len(done), len(mine))
    no_window = [r for r in todo if r["n_window_tokens"] == 0]
    todo = [r for r in todo if r["n_window_tokens"] > 0]
    progress = Progress(f"score H{h1}-{h2} shard {shard}/{n_shards}", len(mine), "trajectories", logger=log)
    progress.update(len(done) + len(no_window))
    with open(partial, "a") as fh:
        for r in no_window:  # recorded, excluded from selection later
            fh.write(json.dumps({"traj_id": r["traj_id"], "score": None, "n_window_tokens": 0}) + "\n")
        fh.flush()
        if todo:
            scorer = Scorer(model_dir, device=device, chunk=chunk)
            rows = load_rows(token_shards, {r["traj_id"] for r in todo}, h2)
            missing = [r["traj_id"] for r in todo if r["traj_id"] not in rows]
            if missing:
                raise KeyError(f"pool trajectories not in the token shards: {missing[:5]}")
            per_batch = max(1, batch_tokens // h2)
            pending = []
            for s in range(0, len(todo), per_batch):
                group = todo[s : s + per_batch]
                ids = np.stack([rows[r["traj_id"]][0] for r in group])
                targets = np.stack([window_targets(rows[r["traj_id"]][1], h1, h2) for r in group])
                for r, lp in zip(group, scorer.logprobs(ids, targets)):
                    score = float(lp.mean())
                    if not math.isfinite(score):
                        raise FloatingPointError(
                            f"trajectory {r['traj_id']}: score {score} under {model_dir}"
                        )
                    pending.append({"traj_id": r["traj_id"], "score": score, "n_window_tokens": len(lp)})
                progress.update(len(group), tokens=len(group) * h2)
                if len(pending) >= write_every:
                    fh.write("".join(json.dumps(p) + "\n" for p in pending))
                    fh.flush()
                    os.fsync(fh.fileno())
                    pending = []
            fh.write("".join(json.dumps(p) + "\n" for p in pending))
    progress.close()
    done = _read_partial(partial)
    recs = [done[r["traj_id"]] for r in mine]
    write_table(out_path, pa.Table.from_pylist(recs, schema=SCORES_SCHEMA))
    partial.unlink()
    n0 = sum(1 for r in recs if r["n_window_tokens"] == 0)
    if n0:
        log.info(
            "shard %d: %d trajectories have no assistant token in (H1, H2] and are excluded from selection",
            shard,
            n0,
        )
    return {"scored": len(recs) - n0, "no_window": n0}


def merge(shards: Sequence[str | Path], out_path: str | Path) -> pa.Table:
    table = pa.concat_tables([pq.read_table(p) for p in shards]).sort_by("traj_id")
    n0 = sum(1 for x in table.column("n_window_tokens").to_pylist() if x == 0)
    log.info(
        "scores: %d trajectories (%d without window tokens, excluded from selection)", table.num_rows, n0
    )
    write_table(out_path, table)
    return table
