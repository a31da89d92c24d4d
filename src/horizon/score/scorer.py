"""Teacher-forced log-probabilities under a model, without ever materialising [T, vocab] logits.

score_i = mean over the supervised (assistant) tokens x_t at positions t in (H1, H2] of
log p_theta1(x_t | x_<t). The trunk runs over positions 1..H2 once; the LM head and the
log-softmax run only on the hidden states that predict window tokens, `chunk` positions at a
time (Qwen3's vocabulary is 151,936: 16K positions of fp32 logits would be ~10 GB), with
horizon.lmhead, the code that training's chunked loss uses too.

Scoring shards are independent and resumable: finished rows are appended to a partial JSONL file
next to the shard (not a Snakemake output, so a killed job keeps it), and the shard's parquet
appears only when every row of the shard is scored.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from horizon.data.tokens import iter_token_rows
from horizon.io import Journal, model_stamp, stamp, write_table
from horizon.lmhead import token_logprobs
from horizon.progress import Progress

log = logging.getLogger("horizon.score.scorer")

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
        model = AutoModelForCausalLM.from_pretrained(
            str(model_dir), dtype=dtype, attn_implementation=attn_implementation
        ).to(self.device)
        self._attach(model, str(model_dir), chunk)

    def _attach(self, model, name: str, chunk: int) -> None:
        self.model = model
        self.model.eval()
        self.model_dir = name
        self.trunk = self.model.get_decoder()
        self.head = self.model.get_output_embeddings()
        self.chunk = chunk

    @classmethod
    def of_model(cls, model, chunk: int = 512) -> Scorer:
        """A scorer of a model already in memory, on its device (gpu-check's random weights: no save)."""
        import torch

        scorer = cls.__new__(cls)
        scorer.torch = torch
        scorer.device = str(next(model.parameters()).device)
        scorer._attach(model, f"<{type(model).__name__} in memory>", chunk)
        return scorer

    def logprobs(self, ids: np.ndarray, targets: np.ndarray) -> list[np.ndarray]:
        """ids [B, T] int, targets [B, T] bool (position 0 never a target) -> per row, log p of its targets.

        Rows share one length T; a shorter row is right-padded with no target in its padding.
        """
        torch = self.torch
        if targets[:, 0].any():
            raise ValueError("position 0 has no context and cannot be a target")
        with torch.inference_mode():
            x = torch.as_tensor(np.asarray(ids, dtype=np.int64), device=self.device)
            hidden = self.trunk(input_ids=x).last_hidden_state  # [B, T, d]: the only full-length tensor
            rows, cols = (torch.as_tensor(a, device=self.device) for a in np.nonzero(targets))
            flat = hidden.reshape(-1, hidden.shape[-1])
            # the hidden state at t - 1 predicts the token at t
            lp = token_logprobs(
                self.head.weight, flat, rows * x.shape[1] + cols - 1, x[rows, cols], self.chunk
            )
            out_flat = lp.cpu().numpy()
        counts = targets.sum(axis=1)
        return np.split(out_flat, np.cumsum(counts)[:-1])


def window_targets(roles: np.ndarray, h1: int, h2: int) -> np.ndarray:
    """Supervised positions t with H1 < t <= min(H2, length) (1-based), i.e. 0-based H1..H2-1."""
    n = min(len(roles), h2)  # a trajectory may end inside the window (score.pool: longer_than_h1)
    mask = np.zeros(n, dtype=bool)
    mask[h1:n] = roles[h1:n] == 1
    return mask


def _right_padded(arrays: list[np.ndarray], fill) -> np.ndarray:
    """Rows padded on the right to the longest: under causal attention a real position never sees
    the padding after it, so no mask is needed (pool rows of length H2 need no padding at all)."""
    out = np.full((len(arrays), max(len(a) for a in arrays)), fill, dtype=arrays[0].dtype)
    for i, a in enumerate(arrays):
        out[i, : len(a)] = a
    return out


def _score_batches(scorer: Scorer, todo: list[dict], rows: dict, h1: int, h2: int, batch_tokens: int):
    """Yield (group, records) for batches of pool trajectories (sorted by length: neighbours are alike)."""
    per_batch = max(1, batch_tokens // h2)
    for s in range(0, len(todo), per_batch):
        group = todo[s : s + per_batch]
        ids = _right_padded([rows[r["traj_id"]]["input_ids"] for r in group], 0)
        targets = _right_padded([window_targets(rows[r["traj_id"]]["roles"], h1, h2) for r in group], False)
        recs = []
        for r, lp in zip(group, scorer.logprobs(ids, targets)):
            score = float(lp.mean())
            if not math.isfinite(score):
                raise FloatingPointError(f"trajectory {r['traj_id']}: score {score} under {scorer.model_dir}")
            recs.append({"traj_id": r["traj_id"], "score": score, "n_window_tokens": len(lp)})
        yield group, recs


def shard_inputs(pool_path, token_shards, model_dir, h1: int, h2: int) -> dict:
    """What a shard's journaled scores were made from: a journal of another model, horizon, pool or token
    shards is not resumed (horizon.io.Journal)."""
    return {
        "model": model_stamp(model_dir),
        "tokens": [stamp(s) for s in token_shards],
        "pool": stamp(pool_path),
        "h1": h1,
        "h2": h2,
    }


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
    mine = pq.read_table(pool_path).to_pylist()[shard::n_shards]  # sorted by length: every n-th row balances
    made_from = shard_inputs(pool_path, token_shards, model_dir, h1, h2)
    journal = Journal(out_path.with_name(f".{out_path.stem}.partial.jsonl"), made_from)
    done = {r["traj_id"] for r in journal.read()}
    todo = [r for r in mine if r["traj_id"] not in done]
    if done:
        log.info("shard %d: resuming, %d of %d trajectories already scored", shard, len(done), len(mine))
    no_window = [r for r in todo if r["n_window_tokens"] == 0]
    todo = [r for r in todo if r["n_window_tokens"] > 0]
    progress = Progress(f"score H{h1}-{h2} shard {shard}/{n_shards}", len(mine), "trajectories", logger=log)
    progress.update(len(done) + len(no_window))
    # recorded, excluded from selection later
    journal.append({"traj_id": r["traj_id"], "score": None, "n_window_tokens": 0} for r in no_window)
    if todo:
        scorer = Scorer(model_dir, device=device, chunk=chunk)
        wanted = {r["traj_id"] for r in todo}
        rows = dict(iter_token_rows(token_shards, ("input_ids", "roles"), traj_ids=wanted, limit=h2))
        missing = [t for t in wanted if t not in rows]
        if missing:
            raise KeyError(f"pool trajectories not in the token shards: {sorted(missing)[:5]}")
        pending = []
        for group, recs in _score_batches(scorer, todo, rows, h1, h2, batch_tokens):
            pending += recs
            progress.update(len(group), tokens=sum(min(int(r["n_tokens"]), h2) for r in group))
            if len(pending) >= write_every:
                journal.append(pending)
                pending = []
        journal.append(pending)
    progress.close()
    scored = {r["traj_id"]: r for r in journal.read()}
    recs = [scored[r["traj_id"]] for r in mine]
    write_table(out_path, pa.Table.from_pylist(recs, schema=SCORES_SCHEMA))
    journal.remove()
    n0 = sum(1 for r in recs if r["n_window_tokens"] == 0)
    if n0:
        log.info(
            "shard %d: %d trajectories have no assistant token in (H1, H2], excluded from selection",
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
