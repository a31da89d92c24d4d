"""Real training runs on CPU: DeepSpeed ZeRO-3 on 2 processes, refinement from theta1, schedule, resume."""

import json
import math
import os
import signal
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from horizon import config as hc
from horizon.train.examples import Collator, Examples, TrainSpec
from horizon.train.launch import train_model
from tests.helpers import REPO, checkpoint_written, snakemake, write_config

pytestmark = pytest.mark.slow


def train_cfg(**over):
    base = hc.load(REPO / "config.yaml")["train"]
    base.update(
        {
            "lr": 3e-3,
            "bf16": False,
            "deepspeed": None,
            "gradient_checkpointing": False,
            "dataloader_workers": 0,
            "save_steps": 1000,
            "epochs": 4,
            "optim": "adamw_torch",
            "global_batch": 1,  # one process, batch 1: one sequence per optimizer step
        }
    )
    base.update(over)
    return base


def spec(corpus, tmp_path, name, horizon=512, **kw):
    train = kw.pop("train", train_cfg())
    return TrainSpec(
        name=name,
        model_init=kw.pop("model_init", str(corpus / "student")),
        tokenizer=str(corpus / "student"),
        token_shards=[str(corpus / "tokens.parquet")],
        horizon=horizon,
        output=str(tmp_path / "models" / name),
        checkpoints=str(tmp_path / "checkpoints" / name),
        train=train,
        seed=kw.pop("seed", 0),
        **kw,
    )


def losses(model_dir):
    return [json.loads(x)["loss"] for x in (model_dir / "train_log.jsonl").read_text().splitlines()]


ZERO3 = dict(deepspeed="zero3", cpu_processes=2, epochs=6, save_steps=2, global_batch=2)


def test_deepspeed_zero3_two_processes_on_cpu(tiny_corpus, tmp_path):
    from transformers import AutoModelForCausalLM

    s = spec(tiny_corpus, tmp_path, "ds", train=train_cfg(**ZERO3))
    train_model(s, threads=2)
    out = tmp_path / "models" / "ds"
    log = losses(out)
    assert len(log) == 6  # 2 examples / (2 ranks x batch 1) = 1 step per epoch
    assert log[-1] < log[0] - 0.2
    timing = json.loads((out / "timing.json").read_text())
    assert timing["world_size"] == 2 and timing["device"] == "cpu" and timing["tokens_seen"] == 6 * 1024
    args = json.loads((out / "training_args.json").read_text())
    ds = args["deepspeed_config"]
    assert ds["zero_optimization"]["stage"] == 3 and ds["gradient_clipping"] == 1.0
    assert ds["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] is True
    model = AutoModelForCausalLM.from_pretrained(out)  # consolidated weights, not ZeRO shards
    assert sum(p.numel() for p in model.parameters()) > 0
    assert not list((tmp_path / "checkpoints" / "ds").glob("checkpoint-*"))  # cleaned once final
    # the paper's setting, killed and resumed: SIGKILL the launcher's process group after a checkpoint
    killed = spec(tiny_corpus, tmp_path, "ds-killed", train=train_cfg(**ZERO3))
    kill_after_first_checkpoint(killed, tmp_path)
    train_model(killed, threads=2)  # the rerun resumes from the checkpoint
    resumed = tmp_path / "models" / "ds-killed"
    assert json.loads((resumed / "timing.json").read_text())["segments"] == 2
    assert losses(resumed) == pytest.approx(log, rel=1e-4)  # the same losses as the uninterrupted run


def training_processes(marker: str) -> list[str]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd:
            out.append(f"{pid}: {cmd[:160]}")
    return out


def wait_for_workers_to_end(marker: str, seconds: float = 30) -> list[str]:
    """Wait until no process with `marker` on its command line is left (torchrun's workers live in
    their own sessions and die a moment after it); those still alive after `seconds`."""
    deadline = time.time() + seconds
    while training_processes(marker) and time.time() < deadline:
        time.sleep(0.2)
    return training_processes(marker)


SFT_JOB = (
    "from horizon.train.examples import TrainSpec; from horizon.train.launch import train_model; "
    "train_model(TrainSpec.load({path!r}), threads=2)"
)


def kill_after_first_checkpoint(s, tmp_path, job: str = SFT_JOB) -> None:
    """Run the training job (`job`: Python code that trains the spec saved at {path}) as a process group,
    as Snakemake or Slurm does, and SIGKILL the group once a checkpoint is complete; no worker may
    survive (torchrun starts its workers in new sessions)."""
    import sys

    path = tmp_path / f"{s.name}.json"
    s.save(path)
    proc = subprocess.Popen([sys.executable, "-c", job.format(path=str(path))], start_new_session=True)
    ckpts = Path(s.checkpoints)
    deadline = time.time() + 600
    while (
        not any(map(checkpoint_written, ckpts.glob("checkpoint-*/trainer_state.json")))
        and time.time() < deadline
        and proc.poll() is None
    ):
        time.sleep(0.05)
    assert proc.poll() is None, "the training job ended before its first checkpoint"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert wait_for_workers_to_end(str(ckpts)) == [], "training workers survived the kill of their job"


def test_zero3_chunked_loss_equals_the_plain_loss(tiny_corpus, tmp_path):
    """Two ranks under ZeRO-3 (partitioned, tied LM-head weight): five steps, the plain path's losses."""
    runs = {}
    for kind in ("plain", "chunked"):
        train = train_cfg(
            deepspeed="zero3", cpu_processes=2, epochs=5, loss=kind, loss_chunk=64, global_batch=2
        )
        train_model(spec(tiny_corpus, tmp_path, f"z3-{kind}", train=train), threads=2)
        runs[kind] = losses(tmp_path / "models" / f"z3-{kind}")
        args = json.loads((tmp_path / "models" / f"z3-{kind}" / "training_args.json").read_text())
        assert args["loss"] == kind and args["deepspeed_config"]["zero_optimization"]["stage"] == 3
    assert len(runs["plain"]) == 5 and runs["plain"][-1] < runs["plain"][0]
    assert runs["chunked"] == pytest.approx(runs["plain"], rel=1e-5)


def test_refinement_starts_from_theta1_and_schedule_is_cosine_without_warmup(tiny_corpus, tmp_path):
    from transformers import AutoModelForCausalLM

    theta1 = spec(tiny_corpus, tmp_path, "single-K256", horizon=256, train=train_cfg(epochs=3))
    train_model(theta1, threads=2)
    # refine on one trajectory, so its first batch is known
    tid = pq.read_table(tiny_corpus / "tokens.parquet").column("traj_id")[0].as_py()
    subset = tmp_path / "subset.parquet"
    pq.write_table(pa.table({"traj_id": [tid]}), subset)
    ref = spec(
        tiny_corpus,
        tmp_path,
        "refine",
        horizon=512,
        model_init=theta1.output,
        include=str(subset),
        train=train_cfg(epochs=5),
    )
    train_model(ref, threads=2)
    first = losses(tmp_path / "models" / "refine")[0]
    ex = Examples(ref.examples_path)
    batch = Collator(0)([ex[0]])

    def loss_of(model):
        with torch.no_grad():
            return model(**batch).loss.item()

    assert loss_of(AutoModelForCausalLM.from_pretrained(theta1.output)) == pytest.approx(first, rel=1e-4)
    assert loss_of(AutoModelForCausalLM.from_pretrained(tiny_corpus / "student")) != pytest.approx(
        first, rel=1e-2
    )
    # the schedule, as the trainer used it: peak at the first step, cosine to 0, no warmup
    log = [json.loads(x) for x in (tmp_path / "models/refine/train_log.jsonl").read_text().splitlines()]
    total = len(log)
    assert total == 5
    for i, rec in enumerate(log):
        assert rec["lr"] == pytest.approx(3e-3 * 0.5 * (1 + math.cos(math.pi * i / total)), rel=1e-6)
    args = json.loads((tmp_path / "models/refine/training_args.json").read_text())
    assert (
        args["max_grad_norm"] == 1.0 and args["lr_scheduler_type"] == "cosine" and args["warmup_steps"] == 0
    )


def test_a_killed_run_resumes_from_its_last_checkpoint(tiny_corpus, tmp_path):
    """SIGKILL the train rule after its first checkpoint; the rerun continues global_step."""
    (tmp_path / "tasks").mkdir()  # configured paths exist before a run starts
    cfg = write_config(
        tmp_path / "config.yaml",
        {
            "student": {"model": str(tiny_corpus / "student")},
            "corpus": {"source": str(REPO / "tests/fixtures/corpus-sample.jsonl")},
            "tokenize": {"shards": 1, "threads": 1},
            "horizons": [512],
            "split": {"heldout": 0},
            "refine": {"h1": 512, "h2": [1024], "rho": [0.5], "selections": ["top"]},
            "train": train_cfg(epochs=40, save_steps=5, save_total_limit=3),
            "eval": {"benchmarks": {"demo": {"format": "tb1", "path": "tasks"}}},
        },
    )
    target = "results/models/single-K512"
    args = ["--configfile", str(cfg), "--directory", str(tmp_path), "-c2", target]
    snakemake([*args[:-1], "results/tokens/shard-000.parquet", "results/horizons/heldout.parquet"])
    from tests.helpers import BIN

    proc = subprocess.Popen(
        [str(BIN / "snakemake"), "-s", str(REPO / "Snakefile"), *args],
        cwd=tmp_path,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ckpts = tmp_path / "results/checkpoints/single-K512"
    deadline = time.time() + 300
    while (
        not any(map(checkpoint_written, ckpts.glob("checkpoint-*/trainer_state.json")))
        and time.time() < deadline
        and proc.poll() is None
    ):
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_for_workers_to_end("single-K512/spec.json")  # list the checkpoints once none can be completed
    complete = [
        int(p.name.split("-")[1])
        for p in ckpts.glob("checkpoint-*")
        if checkpoint_written(p / "trainer_state.json")
    ]
    done_before = max(complete)
    assert 5 <= done_before < 80 and not (tmp_path / target).exists()
    snakemake([*args[:-1], "--unlock"])  # what a user does after a crash: the lock is stale
    snakemake(["--rerun-incomplete", *args])
    log_text = (tmp_path / "results/logs/train/single-K512.log").read_text()
    assert f"resuming from results/checkpoints/single-K512/checkpoint-{done_before}" in log_text
    out = tmp_path / target
    steps = [json.loads(x)["step"] for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 81))  # every step once: none lost, none repeated
    timing = json.loads((out / "timing.json").read_text())
    assert timing["segments"] == 2 and timing["global_step"] == 80
    # same data order: the resumed run's losses equal an uninterrupted run's
    ref = spec(
        tiny_corpus,
        tmp_path,
        "ref",
        horizon=512,
        train=train_cfg(epochs=40, save_steps=1000),
        seed=42,
        exclude=str(tmp_path / "results/horizons/heldout.parquet"),
    )
    ref.token_shards = [str(tmp_path / "results/tokens/shard-000.parquet")]
    train_model(ref, threads=2)
    assert losses(out) == pytest.approx(losses(tmp_path / "models/ref"), rel=1e-4)
