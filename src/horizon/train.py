"""Full-parameter SFT on horizon-truncated trajectories, with the HF Trainer (+ DeepSpeed ZeRO-3).

One example = the first K tokens of one serialized trajectory; labels are the token ids where the
role tag is 1 (assistant content and its <|im_end|>), -100 elsewhere. Per-device batch 1 and no
packing in the study (padding, if a batch holds several examples, only up to the batch's longest).

The examples of a run are written once (by the launching process, before any worker starts) to an
uncompressed Arrow IPC file that every worker memory-maps: 8 ranks per node share one page cache
copy instead of holding 8 copies of the corpus.

Resumable state lives in `checkpoints/` (HF checkpoints every `save_steps`, the examples file,
the spec and the time segments); the final model directory appears atomically and complete, with
timing.json, train_log.jsonl, training_args.json and examples.json.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from horizon.io import write_json
from horizon.tokens import list_array

log = logging.getLogger("horizon.train")

REPO = Path(__file__).resolve().parents[2]
DEEPSPEED_CONFIGS = {"zero3": REPO / "workflow" / "deepspeed" / "zero3.json"}
EXAMPLES_SCHEMA = pa.schema(
    [("traj_id", pa.string()), ("input_ids", pa.list_(pa.int32())), ("roles", pa.list_(pa.int8()))]
)


@dataclass
class TrainSpec:
    """Everything a training worker needs; written as JSON next to the checkpoints."""

    name: str
    model_init: str  # the student (single-stage) or theta1 (refinement): weights only
    tokenizer: str
    token_shards: list[str]
    horizon: int
    output: str
    checkpoints: str
    train: dict
    seed: int
    include: str | None = None  # parquet with traj_id: keep only these (refinement subsets)
    exclude: str | None = None  # parquet with traj_id: drop these (held-out trajectories)
    extra: dict = field(default_factory=dict)

    @property
    def examples_path(self) -> Path:
        return Path(self.checkpoints) / f"examples-K{self.horizon}.arrow"

    def save(self, path: str | Path) -> None:
        write_json(path, asdict(self))

    @classmethod
    def load(cls, path: str | Path) -> TrainSpec:
        return cls(**json.loads(Path(path).read_text()))


# ---------------------------------------------------------------------------------------------
# examples


def _ids(path: str | None) -> set[str] | None:
    if not path:
        return None
    return set(pq.read_table(path, columns=["traj_id"]).column("traj_id").to_pylist())


def build_examples(spec: TrainSpec) -> dict:
    """Write the run's examples (first K tokens of each kept trajectory) to an Arrow IPC file.

    Trajectories with no supervised token inside K are skipped (their loss is undefined) and
    counted. Deterministic: same inputs, same file.
    """
    out = spec.examples_path
    meta_path = out.with_suffix(".json")
    if out.exists() and meta_path.exists():
        return json.loads(meta_path.read_text())
    include, exclude = _ids(spec.include), _ids(spec.exclude) or set()
    k = spec.horizon
    meta = {"examples": 0, "skipped_no_supervised": 0, "excluded": 0, "tokens": 0, "supervised_tokens": 0}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, EXAMPLES_SCHEMA) as writer:
        for shard in spec.token_shards:
            pf = pq.ParquetFile(shard)
            for batch in pf.iter_batches(batch_size=256, columns=["traj_id", "input_ids", "roles"]):
                tids, ids_out, roles_out = [], [], []
                ids_col, roles_col = batch.column("input_ids"), batch.column("roles")
                for i, tid in enumerate(batch.column("traj_id").to_pylist()):
                    if (include is not None and tid not in include) or tid in exclude:
                        meta["excluded"] += 1
                        continue
                    roles = roles_col[i].values.to_numpy(zero_copy_only=False)[:k]
                    n_sup = int(np.count_nonzero(roles == 1))
                    if n_sup == 0:
                        meta["skipped_no_supervised"] += 1
                        continue
                    ids = ids_col[i].values.to_numpy(zero_copy_only=False)[:k]
                    tids.append(tid)
                    ids_out.append(ids)
                    roles_out.append(roles)
                    meta["examples"] += 1
                    meta["tokens"] += len(ids)
                    meta["supervised_tokens"] += n_sup
                if tids:
                    writer.write_batch(
                        pa.record_batch(
                            [pa.array(tids), list_array(ids_out, np.int32), list_array(roles_out, np.int8)],
                            schema=EXAMPLES_SCHEMA,
                        )
                    )
    if include is not None:
        found = meta["examples"] + meta["skipped_no_supervised"]
        if found != len(include):
            raise ValueError(
                f"{spec.include}: {len(include)} trajectories listed but {found} found in the token shards"
            )
    if meta["examples"] == 0:
        raise ValueError(f"{spec.name}: no example has a supervised token within the first {k} tokens")
    os.replace(tmp, out)
    write_json(meta_path, meta)
    log.info(
        "%s: %d examples at K=%d (%d skipped: no assistant token inside K; %d excluded), %d tokens, %d supervised",
        spec.name,
        meta["examples"],
        k,
        meta["skipped_no_supervised"],
        meta["excluded"],
        meta["tokens"],
        meta["supervised_tokens"],
    )
    return meta


class Examples:
    """Map-style dataset over the memory-mapped examples file (a torch Dataset by duck typing)."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        self._table = None
        self._n = pa.ipc.open_file(pa.memory_map(self.path)).read_all().num_rows

    def _t(self):
        if self._table is None:  # opened lazily: once per dataloader worker process
            self._table = pa.ipc.open_file(pa.memory_map(self.path)).read_all()
            self._ids = self._table.column("input_ids")
            self._roles = self._table.column("roles")
        return self._table

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> dict:
        self._t()
        ids = self._ids[i].values.to_numpy(zero_copy_only=False)
        roles = self._roles[i].values.to_numpy(zero_copy_only=False)
        return {"input_ids": ids, "roles": roles}

    def __getstate__(self):
        return {"path": self.path, "_table": None, "_n": self._n}


def collate(examples: list[dict], pad_id: int) -> dict:
    """Right-pad to the longest example of the batch; labels = ids on supervised tokens, else -100."""
    import torch

    n = max(len(e["input_ids"]) for e in examples)
    ids = torch.full((len(examples), n), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), n), -100, dtype=torch.long)
    mask = torch.zeros((len(examples), n), dtype=torch.long)
    for b, e in enumerate(examples):
        t = torch.from_numpy(np.asarray(e["input_ids"], dtype=np.int64))
        sup = torch.from_numpy(np.asarray(e["roles"]) == 1)
        ids[b, : len(t)] = t
        mask[b, : len(t)] = 1
        labels[b, : len(t)] = torch.where(sup, t, torch.full_like(t, -100))
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


class Collator:
    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, examples: list[dict]) -> dict:
        return collate(examples, self.pad_id)


# ---------------------------------------------------------------------------------------------
# the worker


def deepspeed_config(value: str | None) -> str | None:
    if not value:
        return None
    path = DEEPSPEED_CONFIGS.get(value, Path(value))
    if not Path(path).exists():
        raise FileNotFoundError(
            f"train.deepspeed: {value!r} is neither zero3 nor an existing DeepSpeed JSON file"
        )
    return str(path)


def _checkpointing_args(enabled: bool) -> dict:
    """Gradient (activation) checkpointing, under the argument name this transformers version uses."""
    import inspect

    from transformers import TrainingArguments

    name = (
        "activation_checkpointing"
        if "activation_checkpointing" in inspect.signature(TrainingArguments).parameters
        else "gradient_checkpointing"
    )
    return {name: enabled, f"{name}_kwargs": {"use_reentrant": False} if enabled else None}


def training_arguments(spec: TrainSpec, on_cpu: bool):
    from transformers import TrainingArguments

    t = spec.train
    return TrainingArguments(
        output_dir=spec.checkpoints,
        num_train_epochs=t["epochs"],
        learning_rate=t["lr"],
        lr_scheduler_type=t["scheduler"],
        warmup_steps=t["warmup_ratio"],  # a float in [0, 1) is a ratio of the total steps
        weight_decay=t["weight_decay"],
        adam_beta1=t["adam_beta1"],
        adam_beta2=t["adam_beta2"],
        optim=t["optim"],
        max_grad_norm=t["max_grad_norm"],
        per_device_train_batch_size=t["per_device_batch"],
        gradient_accumulation_steps=t["grad_accum"],
        bf16=t["bf16"],
        deepspeed=deepspeed_config(t["deepspeed"]),
        **_checkpointing_args(t["gradient_checkpointing"]),
        save_strategy="steps",
        save_steps=t["save_steps"],
        save_total_limit=t["save_total_limit"],
        logging_steps=t["logging_steps"],
        logging_first_step=True,
        seed=spec.seed,
        data_seed=spec.seed,
        report_to=[],
        disable_tqdm=True,
        remove_unused_columns=False,
        dataloader_num_workers=t["dataloader_workers"],
        dataloader_pin_memory=not on_cpu,
        include_num_input_tokens_seen="all",
        use_cpu=on_cpu,
        # gloo between CPU processes; a single process is not wrapped in DDP at all
        ddp_backend="gloo" if on_cpu and int(os.environ.get("WORLD_SIZE", "1")) > 1 else None,
        ddp_find_unused_parameters=False,
        save_only_model=False,  # the optimizer and scheduler state are what makes a resume exact
    )


def _progress_callback(spec: TrainSpec, log_path: Path):
    from transformers import TrainerCallback

    class ProgressAndLog(TrainerCallback):
        """One progress line every ~10 s, and train_log.jsonl: per step the loss and the lr it used."""

        def __init__(self):
            self.last = 0.0
            self.lr_used: dict[int, float] = {}
            self.t0 = time.monotonic()
            self.tokens0 = None

        def on_step_begin(self, args, state, control, optimizer=None, **kw):
            if optimizer is not None:
                self.lr_used[state.global_step + 1] = optimizer.param_groups[0]["lr"]

        def on_log(self, args, state, control, logs=None, **kw):
            if not state.is_world_process_zero or not logs or "loss" not in logs:
                return
            rec = {
                "step": state.global_step,
                "epoch": round(state.epoch or 0, 6),
                "loss": logs["loss"],
                "lr": self.lr_used.get(state.global_step, logs.get("learning_rate")),
                "grad_norm": logs.get("grad_norm"),
                "tokens_seen": state.num_input_tokens_seen,
            }
            with open(log_path, "a") as fh:
                fh.write(json.dumps(rec) + "\n")
            now = time.monotonic()
            if self.tokens0 is None:
                self.tokens0 = state.num_input_tokens_seen
            if now - self.last >= 10 or state.global_step == state.max_steps:
                self.last = now
                el = now - self.t0
                rate = (state.num_input_tokens_seen - self.tokens0) / max(el, 1e-9)
                left = (
                    (state.max_steps - state.global_step) * el / max(state.global_step - self._start_step, 1)
                )
                log.info(
                    "train %s: step %d/%d (%.0f%%), loss %.4f, lr %.3g, %s tok/s, eta %.0fs",
                    spec.name,
                    state.global_step,
                    state.max_steps,
                    100 * state.global_step / max(state.max_steps, 1),
                    rec["loss"],
                    rec["lr"] or 0.0,
                    f"{rate:,.0f}",
                    left,
                )

        def on_train_begin(self, args, state, control, **kw):
            self._start_step = state.global_step
            self.t0 = time.monotonic()

    return ProgressAndLog()


def _segments(spec: TrainSpec) -> Path:
    return Path(spec.checkpoints) / "segments.json"


def _record_segment(spec: TrainSpec, seg_id: str, start: float, end: float, tokens: int, steps: int) -> None:
    p = _segments(spec)
    segs = json.loads(p.read_text()) if p.exists() else {}
    segs[seg_id] = {"start": start, "end": end, "tokens_seen": tokens, "global_step": steps}
    write_json(p, segs)


def make_trainer(spec: TrainSpec, callbacks: list | None = None):
    """(trainer, tokenizer) for a spec: the one place where model, data and arguments meet."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer

    on_cpu = not torch.cuda.is_available()
    if on_cpu and os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    args = training_arguments(spec, on_cpu)  # before from_pretrained: ZeRO-3 shards weights at load
    _ = args.device  # initialises the process group now, so that zero.Init sees the whole world
    if on_cpu and args.deepspeed:
        # on CPU accelerate sets up torch.distributed (gloo) but not DeepSpeed's own comm layer
        import deepspeed

        deepspeed.init_distributed(dist_backend="gloo")
    tokenizer = AutoTokenizer.from_pretrained(spec.tokenizer)
    dtype = torch.bfloat16 if (spec.train["bf16"] and not on_cpu) else torch.float32
    model = AutoModelForCausalLM.from_pretrained(
        spec.model_init, dtype=dtype, attn_implementation=spec.train["attn_implementation"]
    )
    model.config.use_cache = False
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=Examples(spec.examples_path),
        data_collator=Collator(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0),
        callbacks=callbacks or [],
    )
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # a dict per step on stdout; our progress lines go to the log
    return trainer, tokenizer


def run_worker(spec_path: str | Path) -> None:
    """Train one model (called once per rank by torchrun)."""
    import torch
    import torch.distributed as dist
    from transformers import TrainerCallback

    start = time.time()
    spec = TrainSpec.load(spec_path)
    on_cpu = not torch.cuda.is_available()
    rank = int(os.environ.get("RANK", "0"))
    ckpt_dir = Path(spec.checkpoints)
    log_path = ckpt_dir / "train_log.jsonl"
    resume = last_complete_checkpoint(ckpt_dir, remove_incomplete=rank == 0)
    if rank == 0:
        # the train log is rewound to the checkpoint we resume from (later lines were not kept)
        step0 = int(resume.rsplit("-", 1)[1]) if resume else 0
        lines = log_path.read_text().splitlines() if log_path.exists() else []
        log_path.write_text("".join(x + "\n" for x in lines if json.loads(x)["step"] <= step0))
        log.info("%s: %s", spec.name, f"resuming from {resume}" if resume else "starting from scratch")
    seg_id = f"{start:.3f}"

    class Segment(TrainerCallback):
        """Keep this run's time on record, so a killed run still counts in wall_hours."""

        last = 0.0

        def _record(self, state):
            if state.is_world_process_zero:
                self.last = time.monotonic()
                _record_segment(
                    spec, seg_id, start, time.time(), state.num_input_tokens_seen, state.global_step
                )

        def on_train_begin(self, a, state, control, **kw):
            self._record(state)

        def on_step_end(self, a, state, control, **kw):
            if time.monotonic() - self.last > 30:
                self._record(state)

        def on_save(self, a, state, control, **kw):
            self._record(state)

    trainer, tokenizer = make_trainer(spec, [_progress_callback(spec, log_path), Segment()])
    trainer.train(resume_from_checkpoint=resume)
    final = Path(spec.output)
    partial = final.with_name(final.name + ".partial")  # deterministic: every rank saves into it
    if trainer.is_world_process_zero() and partial.exists():
        shutil.rmtree(partial)
    trainer.args.distributed_state.wait_for_everyone()
    trainer.save_model(str(partial))  # collective under ZeRO-3 (16-bit weights gathered on rank 0)
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(str(partial))
        _record_segment(
            spec, seg_id, start, time.time(), trainer.state.num_input_tokens_seen, trainer.state.global_step
        )
        _finalize(spec, partial, trainer, on_cpu)
        _replace_dir(partial, final)
        if not spec.train["keep_checkpoints"]:
            # optimizer states are ~12 bytes/parameter: gone once the model is final
            for ckpt in ckpt_dir.glob("checkpoint-*"):
                shutil.rmtree(ckpt, ignore_errors=True)
        log.info("%s: saved %s", spec.name, final)
    trainer.args.distributed_state.wait_for_everyone()
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def last_complete_checkpoint(ckpt_dir: Path, remove_incomplete: bool = False) -> str | None:
    """The newest checkpoint-N that was written to the end (the trainer writes trainer_state.json last).

    A job killed while saving leaves a partial checkpoint; resuming from it would fail or, worse,
    mix states. It is removed (by rank 0) and the previous one is used.
    """
    if not ckpt_dir.exists():
        return None
    found = sorted(
        (p for p in ckpt_dir.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
        key=lambda p: int(p.name.split("-")[-1]),
    )
    for p in reversed(found):
        if (p / "trainer_state.json").exists():
            return str(p)
        log.warning("%s is incomplete (killed while saving?): not resuming from it", p)
        if remove_incomplete:
            shutil.rmtree(p, ignore_errors=True)
    return None


def _replace_dir(src: Path, dst: Path) -> None:
    """Move a finished directory into place (renaming an existing one away first)."""
    if dst.exists():
        old = dst.with_name(dst.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(dst, old)
        os.replace(src, dst)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(src, dst)


def _finalize(spec: TrainSpec, out: Path, trainer, on_cpu: bool) -> None:
    import torch

    meta = json.loads(spec.examples_path.with_suffix(".json").read_text())
    segs = json.loads(_segments(spec).read_text())
    seconds = sum(s["end"] - s["start"] for s in segs.values())
    tokens_seen = int(trainer.state.num_input_tokens_seen)
    epochs = spec.train["epochs"]
    world = trainer.args.world_size
    device = "cpu" if on_cpu else torch.cuda.get_device_name(0)
    timing = {
        "model": spec.name,
        "wall_hours": seconds / 3600,
        "wall_seconds": seconds,
        "segments": len(segs),
        "tokens_seen": tokens_seen,
        "supervised_tokens": int(round(meta["supervised_tokens"] * epochs)),
        "tokens_per_s": tokens_seen / seconds if seconds else None,
        "world_size": world,
        "device": device,
        "global_step": trainer.state.global_step,
        "start": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(min(s["start"] for s in segs.values()))),
        "end": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(max(s["end"] for s in segs.values()))),
        "horizon": spec.horizon,
        "init": spec.model_init,
    }
    write_json(out / "timing.json", timing)
    write_json(out / "examples.json", meta)
    shutil.copy(Path(spec.checkpoints) / "train_log.jsonl", out / "train_log.jsonl")
    effective = {
        k: v
        for k, v in trainer.args.to_dict().items()
        if isinstance(v, str | int | float | bool | type(None))
    }
    ds = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
    if ds is not None:
        effective["deepspeed_config"] = ds.deepspeed_config
    write_json(out / "training_args.json", effective)


if __name__ == "__main__":  # torchrun -m horizon.train SPEC.json
    import sys

    from horizon.io import die_with_parent, setup_logging

    die_with_parent()
    setup_logging(os.environ.get("HORIZON_LOG"))
    run_worker(sys.argv[1])
