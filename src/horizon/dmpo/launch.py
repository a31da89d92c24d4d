"""The DMPO training job: check the reference log-probs, write the pair examples once, start the workers.

The same launch path as SFT (horizon.train.launch.run_workers: torchrun with one process per GPU or
`train.cpu_processes` on gloo, srun + torchrun over several nodes) runs horizon.dmpo.worker, which
keeps SFT's ZeRO-3 config, resume from the last complete checkpoint, timing.json, train_log.jsonl
and training_args.json. Every hyper-parameter comes from `train.*` except DMPO's own (`dmpo.beta`,
`dmpo.gamma`, `dmpo.lr`, `dmpo.epochs`); `train.per_device_batch` counts pairs (two sequences each).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from horizon.data.tokens import list_array
from horizon.dmpo.pairs import SIDES, assistant_turn_ids, side_rows
from horizon.dmpo.ref_logprobs import file_sha256, load_reference
from horizon.io import write_json

log = logging.getLogger("horizon.dmpo.launch")

LOG_KEYS = ["reward_chosen", "reward_rejected", "reward_margin", "reward_accuracy"]
EXAMPLES_SCHEMA = pa.schema(
    [("pair_id", pa.string())]
    + [
        (f"{side}_{col}", pa.list_(t))
        for side in SIDES
        for col, t in (("input_ids", pa.int32()), ("turn_ids", pa.int16()), ("reference", pa.float64()))
    ]
)


@dataclass
class DMPOSpec:
    """Everything a DMPO worker needs; written as JSON next to the checkpoints (duck-types TrainSpec)."""

    name: str
    model_init: str  # the policy: starting point and reference model
    tokenizer: str
    pairs: str
    reference: str
    output: str
    checkpoints: str
    train: dict
    seed: int
    beta: float
    gamma: float
    chunk: int = 512
    horizon: int | None = None  # (SFT's token horizon: none here; timing.json records it as null)
    corpus_check: str | None = None  # (SFT's corpus check: DMPO's rule reads none, so its model gets none)
    extra_timing: dict = field(default_factory=dict)
    log_keys: list = field(default_factory=lambda: list(LOG_KEYS))

    @property
    def examples_path(self) -> Path:
        return Path(self.checkpoints) / "dmpo-examples.arrow"

    def save(self, path: str | Path) -> None:
        write_json(path, asdict(self))

    @classmethod
    def load(cls, path: str | Path) -> DMPOSpec:
        return cls(**json.loads(Path(path).read_text()))


def _sources(spec: DMPOSpec) -> dict:
    return {"pairs_sha256": file_sha256(spec.pairs), "reference_sha256": file_sha256(spec.reference)}


def _current(spec: DMPOSpec, sources: dict) -> dict | None:
    """The examples' meta when they were built from these pairs and reference log-probs; else None, and
    checkpoints of a killed run on other data are removed (resuming them would mix two data sets)."""
    out, meta_path = spec.examples_path, spec.examples_path.with_suffix(".json")
    if not (out.exists() and meta_path.exists()):
        return None
    meta = json.loads(meta_path.read_text())
    if {k: meta.get(k) for k in sources} == sources:
        return meta
    stale = list(Path(spec.checkpoints).glob("checkpoint-*"))
    log.warning(
        "%s: pairs or reference changed since %s was built: rebuilt, %d checkpoints of the old data removed",
        spec.name,
        out,
        len(stale),
    )
    for ckpt in stale:
        shutil.rmtree(ckpt, ignore_errors=True)
    return None


def build_examples(spec: DMPOSpec, reference: dict[str, np.ndarray]) -> dict:
    """One example per pair (both trajectories, their assistant turn per token, their reference log-probs)."""
    out, meta_path = spec.examples_path, spec.examples_path.with_suffix(".json")
    sources = _sources(spec)
    meta = _current(spec, sources)
    if meta is not None:
        return meta
    table = pq.read_table(spec.pairs)
    cols: dict[str, list] = {k: [] for k in EXAMPLES_SCHEMA.names}
    meta = {
        "examples": table.num_rows,
        "tokens": 0,
        "supervised_tokens": 0,
        "pairs": table.num_rows,
        **sources,
    }
    cols["pair_id"] = table.column("pair_id").to_pylist()
    for side in SIDES:
        for traj, ids, roles, turns in side_rows(table, side):
            turn_ids = assistant_turn_ids(roles, turns)
            cols[f"{side}_input_ids"].append(np.asarray(ids, np.int32))
            cols[f"{side}_turn_ids"].append(turn_ids)
            cols[f"{side}_reference"].append(reference[traj])
            meta["tokens"] += len(ids)
            meta["supervised_tokens"] += int((turn_ids >= 0).sum())
    arrays = [pa.array(cols["pair_id"], pa.string())]
    for side in SIDES:
        arrays += [
            list_array(cols[f"{side}_input_ids"], np.int32),
            list_array(cols[f"{side}_turn_ids"], np.int16),
            list_array(cols[f"{side}_reference"], np.float64),
        ]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, EXAMPLES_SCHEMA) as ipc:
        ipc.write_table(pa.Table.from_arrays(arrays, schema=EXAMPLES_SCHEMA))
    os.replace(tmp, out)
    write_json(meta_path, meta)
    log.info(
        "%s: %d pairs, %d tokens, %d assistant tokens",
        spec.name,
        meta["pairs"],
        meta["tokens"],
        meta["supervised_tokens"],
    )
    return meta


def train_dmpo(spec: DMPOSpec, threads: int = 1, log_path: str | None = None) -> None:
    """Refuse reference log-probs of another model or other pairs, then train (resumes from checkpoints)."""
    from horizon.train.launch import run_workers

    reference = load_reference(spec.reference, spec.model_init, spec.pairs)
    run_workers(
        spec, threads, log_path, module="horizon.dmpo.worker", prepare=lambda: build_examples(spec, reference)
    )
