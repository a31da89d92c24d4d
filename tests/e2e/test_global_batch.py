"""train.global_batch on the real launch paths: the optimizer steps do not depend on the machine.

Two torchrun node groups on this machine, rendezvousing over loopback (c10d, gloo, DeepSpeed ZeRO-3,
one process each), started with the per-node command the Slurm launch path builds
(`launch_command` under a Slurm job's environment, minus the `srun` that would start it once per
node), train exactly as one node with two processes: same optimizer steps, same losses. One
process with accumulation 4 makes the same number of optimizer steps as two with accumulation 2.
One process started directly (`single_process_env`) trains as torchrun's one worker does, bit for bit.
"""

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from horizon.data.tokens import TOKENS_SCHEMA
from horizon.train.examples import TrainSpec, build_examples
from horizon.train.launch import check_batch, launch_command, save_spec, train_model, worker_env
from tests.e2e.test_training import losses, train_cfg

pytestmark = pytest.mark.slow

EXAMPLES, LENGTH, EPOCHS = 8, 48, 2
# 8 sequences, global batch 4: 2 optimizer steps per epoch whatever the world size
DS = dict(deepspeed="zero3", epochs=EPOCHS, global_batch=4, per_device_batch=1, save_steps=1000)


@pytest.fixture(scope="module")
def tokens(tmp_path_factory, tiny_corpus):
    """8 random trajectories of 48 tokens in the tiny student's vocabulary (assistant tokens ~ 60%)."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(EXAMPLES):
        roles = (rng.random(LENGTH) < 0.6).astype(np.int8)
        roles[0] = 0
        rows.append({"traj_id": f"t{i}", "input_ids": rng.integers(0, 400, LENGTH).tolist(),
                     "roles": roles.tolist(), "turns": [0] * LENGTH, "n_tokens": LENGTH})  # fmt: skip
    path = tmp_path_factory.mktemp("tokens") / "tokens.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=TOKENS_SCHEMA), path)
    return path


def make_spec(tiny_corpus, tokens, tmp_path, name, **train) -> TrainSpec:
    return TrainSpec(
        name=name,
        model_init=str(tiny_corpus / "student"),
        tokenizer=str(tiny_corpus / "student"),
        token_shards=[str(tokens)],
        horizon=LENGTH,
        output=str(tmp_path / "models" / name),
        checkpoints=str(tmp_path / "checkpoints" / name),
        train=train_cfg(**train),
        seed=0,
    )


def free_rendezvous_job_id() -> str:
    """A Slurm job id whose rendezvous port (29500 + id % 2000, as launch_command derives it) is free."""
    for job_id in range(1, 2000):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", 29500 + job_id))
            except OSError:
                continue
            return str(job_id)
    raise RuntimeError("no free port in 29501..31499")


def run_two_nodes(spec: TrainSpec, tmp_path) -> None:
    """The Slurm path with 2 nodes: the launcher prepares, then each node runs the command srun would."""
    job = {
        "SLURM_JOB_ID": free_rendezvous_job_id(),
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_JOB_NODELIST": "127.0.0.1",
    }
    env = {**os.environ, **job}
    assert check_batch(spec, env, gpus=0) == 2  # 2 nodes x 1 process x batch 1: accumulation 2
    build_examples(spec)
    spec_path = save_spec(spec)
    cmd = launch_command(str(spec_path), env, gpus=0, cpu_processes=1)
    assert cmd[0] == "srun" and "--nnodes=2" in cmd and "--rdzv-backend=c10d" in cmd
    node_cmd = cmd[cmd.index(sys.executable) :]  # what srun starts on every node
    logs = [tmp_path / f"node{i}.log" for i in range(2)]
    nodes = [
        subprocess.Popen(
            node_cmd,
            env={**worker_env(env, 1, 1, str(logs[i])), "SLURM_NODEID": str(i), "SLURM_PROCID": str(i)},
            stdout=subprocess.DEVNULL,
            stderr=open(tmp_path / f"node{i}.err", "w"),
            start_new_session=True,
        )
        for i in range(2)
    ]
    deadline = time.time() + 900
    try:
        for p in nodes:
            p.wait(timeout=max(1, deadline - time.time()))
    finally:
        for p in nodes:
            if p.poll() is None:
                os.killpg(p.pid, 9)
    errors = "\n".join((tmp_path / f"node{i}.err").read_text()[-2000:] for i in range(2))
    assert [p.returncode for p in nodes] == [0, 0], errors


def test_two_node_groups_over_loopback_train_like_one_node_with_two_processes(tiny_corpus, tokens, tmp_path):
    one_node = make_spec(tiny_corpus, tokens, tmp_path, "one-node", cpu_processes=2, **DS)
    train_model(one_node, threads=2)
    two_nodes = make_spec(tiny_corpus, tokens, tmp_path, "two-nodes", cpu_processes=1, **DS)
    run_two_nodes(two_nodes, tmp_path)
    a, b = tmp_path / "models" / "one-node", tmp_path / "models" / "two-nodes"
    steps = EPOCHS * EXAMPLES // DS["global_batch"]
    for out in (a, b):
        timing = json.loads((out / "timing.json").read_text())
        assert timing["world_size"] == 2 and timing["global_batch"] == 4 and timing["grad_accumulation"] == 2
        assert timing["optimizer_steps"] == steps and timing["tokens_seen"] == EPOCHS * EXAMPLES * LENGTH
        args = json.loads((out / "training_args.json").read_text())
        assert args["gradient_accumulation_steps"] == 2 and args["global_batch"] == 4
        assert args["deepspeed_config"]["zero_optimization"]["stage"] == 3
    assert len(losses(a)) == steps
    assert losses(b) == pytest.approx(losses(a), rel=1e-5)


def test_one_process_makes_the_same_optimizer_steps_with_more_accumulation(tiny_corpus, tokens, tmp_path):
    plain = dict(DS, deepspeed=None)
    two = make_spec(tiny_corpus, tokens, tmp_path, "two", cpu_processes=2, **plain)
    one = make_spec(tiny_corpus, tokens, tmp_path, "one", cpu_processes=1, **plain)
    for s in (two, one):
        train_model(s, threads=2)
    t2, t1 = (json.loads((tmp_path / "models" / n / "timing.json").read_text()) for n in ("two", "one"))
    assert (t1["grad_accumulation"], t2["grad_accumulation"]) == (4, 2)
    assert t1["optimizer_steps"] == t2["optimizer_steps"] == EPOCHS * EXAMPLES // 4
    # the same sequences per step, averaged over the same tokens: the same losses up to float order
    assert losses(tmp_path / "models" / "one") == pytest.approx(losses(tmp_path / "models" / "two"), rel=1e-3)


def test_a_global_batch_that_does_not_divide_fails_before_any_work(tiny_corpus, tokens, tmp_path):
    s = make_spec(tiny_corpus, tokens, tmp_path, "bad", cpu_processes=3, **dict(DS, deepspeed=None))
    with pytest.raises(ValueError, match=r"train.global_batch: 4 is not a multiple of world size 3"):
        train_model(s)
    assert not (tmp_path / "checkpoints" / "bad").exists()


def test_one_process_started_directly_trains_as_under_torchrun(tiny_corpus, tokens, tmp_path, monkeypatch):
    """ZeRO-3 on one CPU process: the worker the launcher starts itself and the one torchrun starts
    write the same weights and losses (the launcher skips torchrun's agent only, not the process group)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # one CPU process on a machine with GPUs too
    direct = make_spec(tiny_corpus, tokens, tmp_path, "direct", cpu_processes=1, **DS)
    assert "torch.distributed.run" not in launch_command("spec.json", {}, gpus=0, cpu_processes=1)
    train_model(direct, threads=1)
    agent = make_spec(tiny_corpus, tokens, tmp_path, "agent", cpu_processes=1, **DS)
    build_examples(agent)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=1", "--standalone"]
    subprocess.run(
        [*torchrun, "--nnodes=1", "-m", "horizon.train.worker", str(save_spec(agent))],
        env=worker_env(os.environ, 1, 1, str(tmp_path / "agent.log")),
        check=True,
    )
    a, b = (tmp_path / "models" / n for n in ("direct", "agent"))
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert losses(a) == losses(b) and len(losses(a)) == EPOCHS * EXAMPLES // DS["global_batch"]
