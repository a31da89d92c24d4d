"""The tokenize stage: trajectories.parquet -> token shards with per-token role and turn tags.

Shard i of n takes the rows [i*N/n, (i+1)*N/n) of trajectories.parquet, reading only the row
groups it needs; each shard is an independent job (Snakemake runs them in parallel), and inside a
job the Rust tokenizer encodes a whole batch of turns on `threads` cores.

`train.observations: drop` (the observation-masking ablation) removes the terminal output from the
user turns after the first before serialization: the harness's framing around `{output}` in the
prompt template's `observation` and `confirm` forms stays, so the turn structure is unchanged;
other user turns (parse-error replies) are kept. Every shard records the setting in its parquet
metadata (`horizon.observations`), which training checks.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from horizon.io import atomic_path
from horizon.progress import Progress

log = logging.getLogger("horizon.data.tokens")

TOKENS_SCHEMA = pa.schema(
    [
        ("traj_id", pa.string()),
        ("input_ids", pa.list_(pa.int32())),
        ("roles", pa.list_(pa.int8())),
        ("turns", pa.list_(pa.int16())),
        ("n_tokens", pa.int32()),
    ]
)


def shard_range(n_rows: int, shard: int, n_shards: int) -> tuple[int, int]:
    if not 0 <= shard < n_shards:
        raise ValueError(f"shard {shard} is outside 0..{n_shards - 1}")
    return shard * n_rows // n_shards, (shard + 1) * n_rows // n_shards


def iter_row_range(path: str | Path, start: int, stop: int, columns: list[str], batch_rows: int):
    """Yield record batches covering rows [start, stop) of a parquet file, reading only needed row groups."""
    pf = pq.ParquetFile(path)
    offset = 0
    for rg in range(pf.num_row_groups):
        n = pf.metadata.row_group(rg).num_rows
        lo, hi = max(start, offset), min(stop, offset + n)
        if lo < hi:
            pos = offset
            for batch in pf.iter_batches(batch_size=batch_rows, row_groups=[rg], columns=columns):
                b_lo, b_hi = max(lo - pos, 0), min(hi - pos, batch.num_rows)
                if b_lo < b_hi:
                    yield batch.slice(b_lo, b_hi - b_lo)
                pos += batch.num_rows
        offset += n
        if offset >= stop:
            break


def list_array(arrays: list[np.ndarray], dtype) -> pa.Array:
    """A list<dtype> column from numpy arrays without a Python loop over elements."""
    offsets = np.zeros(len(arrays) + 1, dtype=np.int32)
    np.cumsum([len(a) for a in arrays], out=offsets[1:])
    values = np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.zeros(0, dtype=dtype)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))


OBSERVATIONS_KEY = b"horizon.observations"


def observation_forms(template_path: str | Path) -> list[tuple[str, str]]:
    """(text before, text after) the terminal output in the template's confirm and observation turns.

    In a template of horizon.eval.agent.prompts' format 2 the terminal output is itself framed
    (`terminal_new`, or `terminal_screen` when the earlier output scrolled away), so each turn is
    composed with both framings; an older template has the framing in the turn itself."""
    import yaml

    data = yaml.safe_load(Path(template_path).read_text()) or {}
    framings = [
        data[k].replace("{screen}", "{output}") for k in ("terminal_new", "terminal_screen") if k in data
    ]
    forms = []
    for key in ("confirm", "observation"):  # the longer form first: it ends with the question
        text = data.get(key)
        if not isinstance(text, str) or "{output}" not in text:
            raise ValueError(f"prompt template {template_path}: `{key}` lacks the placeholder {{output}}")
        for framing in framings or ["{output}"]:
            head, _, tail = text.replace("{output}", framing).partition("{output}")
            forms.append((head, tail))
    return forms


def drop_observations(conversation: Sequence[dict], forms: Sequence[tuple[str, str]]) -> list[dict]:
    """The conversation with the terminal output cut out of every user turn after the first."""
    out = [dict(conversation[0])] if conversation else []
    for m in conversation[1:]:
        content = m["content"]
        if m["role"] == "user":
            for head, tail in forms:
                at = content.find(head)
                if at >= 0 and content.endswith(tail) and len(content) - at >= len(head) + len(tail):
                    content = content[: at + len(head)] + tail  # a warnings prefix before the head stays
                    break
        out.append({"role": m["role"], "content": content})
    return out


def shards_observations(paths: Sequence[str | Path]) -> dict[str, str]:
    """path -> the train.observations setting a token shard was made with (keep when unrecorded)."""
    out = {}
    for p in paths:
        meta = pq.read_schema(p).metadata or {}
        out[str(p)] = meta.get(OBSERVATIONS_KEY, b"keep").decode()
    return out


def tokens_table(traj_ids: list[str], serialized: list) -> pa.Table:
    return pa.Table.from_arrays(
        [
            pa.array(traj_ids, pa.string()),
            list_array([s.input_ids for s in serialized], np.int32),
            list_array([s.roles for s in serialized], np.int8),
            list_array([s.turns for s in serialized], np.int16),
            pa.array([len(s) for s in serialized], pa.int32()),
        ],
        schema=TOKENS_SCHEMA,
    )


def tokenize_shard(
    trajectories: str | Path,
    tokenizer_path: str | Path,
    out_path: str | Path,
    shard: int,
    n_shards: int,
    batch_rows: int = 256,
    threads: int | None = None,
    observations: str = "keep",
    template: str | Path | None = None,
) -> dict:
    if threads:
        # must be set before the tokenizer's thread pool starts
        os.environ["RAYON_NUM_THREADS"] = str(threads)
    import time

    from horizon.data.chatml import ChatSerializer
    from horizon.data.tokenizer import load

    t0 = time.perf_counter()
    serializer = ChatSerializer(load(tokenizer_path))
    load_s = time.perf_counter() - t0
    if observations == "drop" and template is None:
        raise ValueError("train.observations: drop needs the prompt template (its observation form)")
    forms = observation_forms(template) if observations == "drop" else None
    schema = TOKENS_SCHEMA.with_metadata({OBSERVATIONS_KEY: observations.encode()})
    n_rows = pq.ParquetFile(trajectories).metadata.num_rows
    start, stop = shard_range(n_rows, shard, n_shards)
    progress = Progress(f"tokenize shard {shard}/{n_shards}", stop - start, "trajectories", logger=log)
    n_tok = 0
    with atomic_path(out_path) as tmp:
        writer = pq.ParquetWriter(tmp, schema, compression="zstd")
        for batch in iter_row_range(trajectories, start, stop, ["traj_id", "conversations"], batch_rows):
            convs = batch.column("conversations").to_pylist()
            if forms is not None:
                convs = [drop_observations(c, forms) for c in convs]
            ser = serializer.serialize_batch(convs)
            table = tokens_table(batch.column("traj_id").to_pylist(), ser)
            writer.write_table(table.replace_schema_metadata(schema.metadata))
            tokens = sum(len(s) for s in ser)
            n_tok += tokens
            progress.update(len(ser), tokens=tokens)
        writer.close()
    progress.close()
    log.info("shard %d: rows %d..%d, %d tokens", shard, start, stop, n_tok)
    return {"rows": stop - start, "tokens": n_tok, "load_seconds": load_s}


def iter_token_rows(
    paths: Sequence[str | Path],
    columns: Sequence[str] = ("input_ids", "roles"),
    traj_ids: set[str] | None = None,
    limit: int | None = None,
    batch_rows: int = 64,
) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """(traj_id, {column: numpy array[:limit]}) for each row of the token shards, in shard order;
    only the trajectories in `traj_ids` when given. The one reader of the token shards."""
    cols = ["traj_id", *[c for c in columns if c != "traj_id"]]
    for p in paths:
        for batch in pq.ParquetFile(p).iter_batches(batch_size=batch_rows, columns=cols):
            arrays = {c: batch.column(c) for c in cols[1:]}
            for i, tid in enumerate(batch.column("traj_id").to_pylist()):
                if traj_ids is None or tid in traj_ids:
                    yield (
                        tid,
                        {c: a[i].values.to_numpy(zero_copy_only=False)[:limit] for c, a in arrays.items()},
                    )
