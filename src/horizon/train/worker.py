"""The training worker: full-parameter SFT with the HF Trainer (+ DeepSpeed ZeRO-3), one process per rank.

`python -m horizon.train.worker SPEC.json`, once per rank (started by horizon.train.launch: torchrun, or
the launcher itself for one process), trains on the
examples horizon.train.examples wrote. Resumable state lives in `checkpoints/` (HF checkpoints every `save_steps`, the examples file,
the spec and the time segments); the final model directory appears atomically and complete, with
timing.json, train_log.jsonl, training_args.json and examples.json.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import zipfile
from pathlib import Path
from typing import NoReturn

from horizon.config import grad_accumulation
from horizon.io import write_json
from horizon.resources import asset
from horizon.train import made
from horizon.train.callbacks import progress_callback, record_segment, segment_callback, segments_path
from horizon.train.examples import Collator, Examples, TrainSpec
from horizon.train.loss import use_loss

log = logging.getLogger("horizon.train.worker")

DEEPSPEED_PRESETS = {"zero3": "deepspeed/zero3.json"}  # shipped with the package (assets/)


# ---------------------------------------------------------------------------------------------
# the worker


def deepspeed_config(value: str | None) -> str | None:
    if not value:
        return None
    path = asset(DEEPSPEED_PRESETS[value]) if value in DEEPSPEED_PRESETS else Path(value)
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
    world = int(os.environ.get("WORLD_SIZE", "1"))
    # the global batch is fixed by config; accumulation absorbs the machine's world size
    accumulation = grad_accumulation(
        t["global_batch"], world, t["per_device_batch"], f" (training {spec.name})"
    )
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
        gradient_accumulation_steps=accumulation,
        bf16=use_bf16(t["bf16"], on_cpu),
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


def cpu_has_amx() -> bool:
    """Whether this CPU multiplies bf16 natively (AMX tiles); torch's private probe, False where it is missing."""
    import torch

    probe = getattr(torch.cpu, "_is_amx_tile_supported", None)
    return bool(probe and probe())


def use_bf16(value: bool | str, on_cpu: bool) -> bool:
    """train.bf16 resolved for this machine. `auto`: bf16 on a GPU and on a CPU with AMX, fp32 on any other
    CPU, where oneDNN runs bf16 matmuls on emulated or narrower paths (bench/cpu_precision.py measured the
    demo's student 1.3x (AVX512-BF16) to 9x (AVX2) slower than in fp32, docs/performance.md)."""
    if value == "auto":
        return not on_cpu or cpu_has_amx()
    return bool(value)


def cpu_bf16_warning(value: bool | str, on_cpu: bool, amx: bool) -> str | None:
    """What to tell a user who asked for bf16 (true, not auto) on a CPU without AMX, else None. Only a
    warning: the key is the user's choice."""
    if value is not True or not on_cpu or amx:
        return None
    return (
        "train.bf16 is true but this CPU has no AMX: bf16 autocast runs emulated here (1.3-9x slower "
        "than fp32 in bench/cpu_precision.py); train.bf16: auto (or false) trains in fp32 on such a CPU"
    )


def load_for_training(spec, model=None):
    """(arguments, tokenizer, model) of a training spec (SFT's or DMPO's), set up in the order DeepSpeed
    needs: the arguments (and the process group) before the weights, so that ZeRO-3 shards them at load.
    `model`: one already built (gpu-check's random weights on the GPU) instead of spec.model_init's."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    on_cpu = not torch.cuda.is_available()
    if on_cpu and os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    warning = cpu_bf16_warning(spec.train["bf16"], on_cpu, on_cpu and cpu_has_amx())
    if warning:
        log.warning("%s (training %s)", warning, spec.name)
    args = training_arguments(spec, on_cpu)
    _ = args.device  # initialises the process group now, so that zero.Init sees the whole world
    if on_cpu and args.deepspeed:
        # on CPU accelerate sets up torch.distributed (gloo) but not DeepSpeed's own comm layer
        import deepspeed

        deepspeed.init_distributed(dist_backend="gloo")
    tokenizer = AutoTokenizer.from_pretrained(spec.tokenizer)
    # bf16 weights on a GPU only: on a CPU bf16 is autocast over fp32 weights
    dtype = torch.bfloat16 if (not on_cpu and use_bf16(spec.train["bf16"], on_cpu)) else torch.float32
    if model is None:
        model = AutoModelForCausalLM.from_pretrained(
            spec.model_init, dtype=dtype, attn_implementation=spec.train["attn_implementation"]
        )
    model.config.use_cache = False
    return args, tokenizer, model


def make_trainer(spec: TrainSpec, callbacks: list | None = None, model=None):
    """(trainer, tokenizer) for a spec: the one place where model, data and arguments meet (`model`: an
    already built one, see load_for_training)."""
    from transformers import Trainer

    args, tokenizer, model = load_for_training(spec, model)
    use_loss(model, spec.train["loss"], spec.train["loss_chunk"])  # before the Trainer inspects forward
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


def _rewind_train_log(log_path: Path, resume: str | None) -> None:
    """The train log goes back to the checkpoint we resume from (later lines were not kept)."""
    step0 = int(resume.rsplit("-", 1)[1]) if resume else 0
    lines = log_path.read_text().splitlines() if log_path.exists() else []
    log_path.write_text("".join(x + "\n" for x in lines if json.loads(x)["step"] <= step0))


def _save_final(spec: TrainSpec, trainer, tokenizer, start: float, on_cpu: bool) -> None:
    """Every rank saves into one partial directory; rank 0 completes it and moves it into place."""
    final = Path(spec.output)
    partial = final.with_name(final.name + ".partial")  # deterministic: every rank saves into it
    if trainer.is_world_process_zero() and partial.exists():
        shutil.rmtree(partial)
    trainer.args.distributed_state.wait_for_everyone()
    trainer.save_model(str(partial))  # collective under ZeRO-3 (16-bit weights gathered on rank 0)
    if not trainer.is_world_process_zero():
        return
    tokenizer.save_pretrained(str(partial))
    state = trainer.state
    record_segment(spec, f"{start:.3f}", start, time.time(), state.num_input_tokens_seen, state.global_step)
    _finalize(spec, partial, trainer, on_cpu)
    _replace_dir(partial, final)
    if not spec.train["keep_checkpoints"]:
        # optimizer states are ~12 bytes/parameter: gone once the model is final
        for ckpt in Path(spec.checkpoints).glob("checkpoint-*"):
            shutil.rmtree(ckpt, ignore_errors=True)
    log.info("%s: saved %s", spec.name, final)


def run_worker(spec_path: str | Path, load=TrainSpec.load, make=None) -> None:
    """Train one model (called once per rank); `load` reads the spec, `make` builds the trainer
    (horizon.dmpo.worker passes its own: same resume, records and final directory)."""
    import torch
    import torch.distributed as dist

    start = time.time()
    spec = load(spec_path)
    on_cpu = not torch.cuda.is_available()
    rank = int(os.environ.get("RANK", "0"))
    log_path = Path(spec.checkpoints) / "train_log.jsonl"
    world = int(os.environ.get("WORLD_SIZE", "1"))
    resume = last_complete_checkpoint(Path(spec.checkpoints), remove_incomplete=rank == 0, world_size=world)
    if rank == 0:
        _rewind_train_log(log_path, resume)
        log.info("%s: %s", spec.name, f"resuming from {resume}" if resume else "starting from scratch")
    callbacks = [progress_callback(spec, log_path), segment_callback(spec, start)]
    trainer, tokenizer = (make or make_trainer)(spec, callbacks)
    trainer.train(resume_from_checkpoint=resume)
    _save_final(spec, trainer, tokenizer, start, on_cpu)
    trainer.args.distributed_state.wait_for_everyone()
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def last_complete_checkpoint(
    ckpt_dir: Path, remove_incomplete: bool = False, world_size: int = 1
) -> str | None:
    """The newest checkpoint-N that was written to the end by every rank.

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
        if _complete(p, world_size):
            return str(p)
        log.warning("%s is incomplete (killed while saving?): not resuming from it", p)
        if remove_incomplete:
            shutil.rmtree(p, ignore_errors=True)
    return None


def _complete(ckpt: Path, world_size: int) -> bool:
    """The Trainer's rank 0 writes trainer_state.json last, after DeepSpeed's shards (a barrier ends
    their save), but every other rank writes its own rng_state_<rank>.pth without waiting for it: a
    kill can leave one missing or cut short (torch.save writes a zip: a cut one has no central
    directory), and the Trainer would fail to load it or resume without it. trainer_state.json itself
    is written in place: a kill in the middle leaves it empty or cut short (seen in the crash test once
    the worker shared the job's process group), which the Trainer cannot load."""
    try:
        json.loads((ckpt / "trainer_state.json").read_text())
    except (FileNotFoundError, ValueError):  # another OSError (NFS, permissions) is raised, not a deletion
        return False
    return world_size == 1 or all(zipfile.is_zipfile(ckpt / f"rng_state_{r}.pth") for r in range(world_size))


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


def batch_record(trainer) -> dict:
    """The batch as the trainer used it: global batch = per-device batch x accumulation x world size."""
    args = trainer.args
    return {
        "global_batch": args.per_device_train_batch_size * args.gradient_accumulation_steps * args.world_size,
        "per_device_batch": args.per_device_train_batch_size,
        "grad_accumulation": args.gradient_accumulation_steps,
        "optimizer_steps": trainer.state.global_step,
    }


def _finalize(spec: TrainSpec, out: Path, trainer, on_cpu: bool) -> None:
    import torch

    meta = json.loads(spec.examples_path.with_suffix(".json").read_text())
    segs = json.loads(segments_path(spec).read_text())
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
        **batch_record(trainer),
        "start": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(min(s["start"] for s in segs.values()))),
        "end": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(max(s["end"] for s in segs.values()))),
        "horizon": spec.horizon,
        "init": spec.model_init,
        **getattr(spec, "extra_timing", {}),  # e.g. DMPO: the hours of its preference rollouts and reference
    }
    write_json(out / "timing.json", timing)
    write_json(out / "examples.json", meta)
    if spec.corpus_check:  # marks a model trained under the check (workflow/rules/train.smk reads it)
        shutil.copy(spec.corpus_check, out / made.CORPUS_CHECK)
    shutil.copy(Path(spec.checkpoints) / "train_log.jsonl", out / "train_log.jsonl")
    effective = {
        k: v
        for k, v in trainer.args.to_dict().items()
        if isinstance(v, str | int | float | bool | type(None))
    }
    effective.update(batch_record(trainer))
    effective["loss"] = spec.train["loss"]  # train.loss: how the LM head and cross-entropy ran
    if spec.train["loss"] == "chunked":
        effective["loss_chunk"] = spec.train["loss_chunk"]
    ds = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
    if ds is not None:
        effective["deepspeed_config"] = ds.deepspeed_config
    write_json(out / "training_args.json", effective)


def exit_done() -> NoReturn:
    """End a worker whose outputs are all written (and its process group destroyed) without the
    interpreter's teardown: there a library's native thread left running can abort the process
    ("terminate called without an active exception", SIGABRT: seen in rank 1 of a ZeRO-3 run on two CPU
    processes after the model was saved, 1 run in 11 beside two busy loops), and torchrun then fails the
    whole job."""
    import sys

    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":  # python -m horizon.train.worker SPEC.json (module docstring)
    import sys

    from horizon.io import die_with_parent, setup_logging

    die_with_parent()
    setup_logging(os.environ.get("HORIZON_LOG"))
    run_worker(sys.argv[1])
    exit_done()
