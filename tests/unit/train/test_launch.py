"""Launching the training workers: single node and multi-node command lines, resume from the last
complete checkpoint, and train.global_batch (accumulation from the world size, named errors at parse
and launch time)."""

import sys

import pytest

from horizon import config as hc
from horizon.train.examples import TrainSpec
from horizon.train.launch import (
    check_batch,
    gpu_count,
    launch_command,
    single_process_env,
    slurm_nodes,
    world_size,
)
from horizon.train.worker import last_complete_checkpoint
from tests.helpers import REPO


def test_single_node_cpu_and_gpu():
    cmd = launch_command("spec.json", {}, gpus=0, cpu_processes=2)
    assert cmd == [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node=2",
        "--standalone",
        "--nnodes=1",
        "-m",
        "horizon.train.worker",
        "spec.json",
    ]
    assert "--nproc-per-node=8" in launch_command(
        "spec.json", {"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "1"}, 8, 1
    )


def test_one_process_on_one_node_runs_the_worker_itself_as_rank_0_of_1():
    for gpus, cpu_processes in ((0, 1), (1, 4)):
        cmd = launch_command("spec.json", {}, gpus=gpus, cpu_processes=cpu_processes)
        assert cmd == [sys.executable, "-m", "horizon.train.worker", "spec.json"]
    env = single_process_env({"PATH": "/bin"})
    assert env["PATH"] == "/bin" and env["RANK"] == env["LOCAL_RANK"] == "0"
    assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == "1" and env["MASTER_ADDR"] == "127.0.0.1"
    assert env["MASTER_PORT"] == "0"  # the worker's store takes a port the kernel picks


def test_multi_node_under_slurm_uses_srun_and_c10d_on_the_first_node():
    env = {"SLURM_JOB_ID": "1234", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "gpu[07-08]"}
    cmd = launch_command("/r/spec.json", env, gpus=8, cpu_processes=1)
    assert cmd[:4] == ["srun", "--nodes=2", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    assert "--nproc-per-node=8" in cmd and "--nnodes=2" in cmd and "--rdzv-backend=c10d" in cmd
    assert "--rdzv-endpoint=gpu07:30734" in cmd and "--rdzv-id=1234" in cmd
    assert cmd[-3:] == ["-m", "horizon.train.worker", "/r/spec.json"]
    assert slurm_nodes({"SLURM_JOB_NUM_NODES": "4"}) == 1  # not inside a Slurm job


def test_gpu_count_asks_torch_only_where_a_gpu_device_node_exists(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    assert gpu_count(device_nodes=(str(tmp_path / "nvidiactl"),)) == 0  # torch not asked
    (tmp_path / "nvidiactl").touch()
    assert gpu_count(device_nodes=(str(tmp_path / "none"), str(tmp_path / "nvidiactl"))) == 3


def test_resume_skips_and_removes_a_partial_checkpoint(tmp_path):
    # 15: killed before trainer_state.json; 20 and 25: killed while writing it (empty, cut short)
    states = {5: "{}", 10: '{"global_step": 10}', 15: None, 20: "", 25: '{"global_step": 2'}
    for step, state in states.items():
        d = tmp_path / f"checkpoint-{step}"
        d.mkdir()
        if state is not None:
            (d / "trainer_state.json").write_text(state)
    assert last_complete_checkpoint(tmp_path, remove_incomplete=True) == str(tmp_path / "checkpoint-10")
    assert not any((tmp_path / f"checkpoint-{s}").exists() for s in (15, 20, 25))
    assert last_complete_checkpoint(tmp_path / "none") is None


def test_resume_under_two_ranks_needs_every_ranks_rng_state(tmp_path):
    """Rank 1 writes its RNG state without waiting for rank 0's trainer_state.json: one cut short by a
    kill makes the checkpoint incomplete (with one rank, trainer_state.json is enough)."""
    import zipfile

    for step, cut in ((5, False), (10, True)):
        d = tmp_path / f"checkpoint-{step}"
        d.mkdir()
        (d / "trainer_state.json").write_text("{}")
        for rank in (0, 1):
            with zipfile.ZipFile(d / f"rng_state_{rank}.pth", "w") as z:
                z.writestr("data.pkl", b"x" * 100)
        if cut:
            whole = (d / "rng_state_1.pth").read_bytes()
            (d / "rng_state_1.pth").write_bytes(whole[: len(whole) // 2])
    assert last_complete_checkpoint(tmp_path, world_size=1) == str(tmp_path / "checkpoint-10")
    assert last_complete_checkpoint(tmp_path, remove_incomplete=True, world_size=2) == str(
        tmp_path / "checkpoint-5"
    )
    assert not (tmp_path / "checkpoint-10").exists()


def raw_paper() -> dict:
    import yaml

    return yaml.safe_load((REPO / "config.yaml").read_text())


def test_accumulation_is_global_batch_over_world_times_per_device_batch():
    assert hc.grad_accumulation(4, 4, 1) == 1  # the paper: 4 GPUs x batch 1
    assert hc.grad_accumulation(4, 2, 1) == 2 and hc.grad_accumulation(4, 1, 1) == 4
    assert hc.grad_accumulation(16, 2, 2) == 4
    with pytest.raises(hc.GlobalBatchError) as e:
        hc.grad_accumulation(4, 8, 1, " (rule train_single)")
    assert "train.global_batch: 4 is not a multiple of world size 8 x train.per_device_batch 1 = 8" in str(
        e.value
    )
    assert "(rule train_single)" in str(e.value)
    with pytest.raises(hc.GlobalBatchError, match="world size 2 x train.per_device_batch 3 = 6"):
        hc.grad_accumulation(4, 2, 3)


def test_paper_default_and_the_removed_grad_accum_key():
    assert hc.load(REPO / "config.yaml")["train"]["global_batch"] == 4
    assert hc.load(REPO / "demo" / "config.yaml")["train"]["global_batch"] == 4  # 1 process x 4: as before
    cfg = raw_paper()
    cfg["train"]["grad_accum"] = 2
    with pytest.raises(
        hc.ConfigError, match=r"train.grad_accum: no longer a config key: .*train.global_batch"
    ):
        hc.validate(cfg)


def test_gpus_and_world_from_rule_resources():
    assert hc.gpus_of({"gres": "gpu:8"}) == 8 and hc.gpus_of({"gres": "gpu:h100:4"}) == 4
    assert hc.gpus_of({"gres": "shard:2,gpu:a100:2"}) == 2 and hc.gpus_of({"gpu": 3}) == 3
    assert hc.gpus_of({"mem_mb": 1000}) is None
    assert hc.training_world({"gres": "gpu:4", "nodes": 2}) == 8 and hc.training_world({}) is None
    cfg = hc.validate(raw_paper())
    hc.check_global_batch(cfg, {"train_single": {"gres": "gpu:2", "nodes": 2}, "refine": {}})
    with pytest.raises(hc.GlobalBatchError, match=r"rule refine: 3 GPUs x 1 node\(s\) in the profile"):
        hc.check_global_batch(cfg, {"refine": {"gres": "gpu:3"}})


def spec(**train) -> TrainSpec:
    t = {"global_batch": 4, "per_device_batch": 1, "cpu_processes": 1, **train}
    return TrainSpec("m", "init", "tok", [], 8, "out", "ckpt", t, 0)


def test_launch_time_check_uses_the_world_this_job_has():
    slurm2 = {"SLURM_JOB_ID": "5", "SLURM_JOB_NUM_NODES": "2"}
    assert world_size(slurm2, gpus=4, cpu_processes=1) == 8 and world_size({}, 0, 3) == 3
    assert check_batch(spec(), {}, gpus=4) == 1 and check_batch(spec(), {}, gpus=2) == 2
    assert check_batch(spec(cpu_processes=2), slurm2, gpus=0) == 1
    with pytest.raises(hc.GlobalBatchError, match=r"world size 8 .*\(m: 2 node\(s\) x 4 GPUs\)"):
        check_batch(spec(), slurm2, gpus=4)


def test_bf16_on_a_cpu_without_amx_is_named_with_its_key():
    """bf16 autocast without AMX is emulated (bench/cpu_precision.py: 1.3-9x slower than fp32): asked for
    (true), the worker says so and names the key; fp32, auto, a GPU and an AMX CPU train silently."""
    from horizon.train.worker import cpu_bf16_warning

    warning = cpu_bf16_warning(True, on_cpu=True, amx=False)
    assert warning and "train.bf16: auto" in warning and "AMX" in warning
    assert cpu_bf16_warning(False, on_cpu=True, amx=False) is None
    assert cpu_bf16_warning(True, on_cpu=False, amx=False) is None
    assert cpu_bf16_warning(True, on_cpu=True, amx=True) is None
    # auto takes fp32 there
    assert cpu_bf16_warning("auto", on_cpu=True, amx=False) is None


def test_a_wrong_train_bf16_names_its_values_as_yaml_spells_them(tmp_path):
    import yaml

    cfg = yaml.safe_load((REPO / "demo" / "config.yaml").read_text())
    cfg["train"]["bf16"] = "yes-please"
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    with pytest.raises(
        Exception, match=r"train\.bf16: 'yes-please' is not allowed \(allowed: true, false, auto\)"
    ):
        hc.load(tmp_path / "c.yaml")


@pytest.mark.parametrize(
    ("value", "on_cpu", "amx", "bf16"),
    [
        ("auto", False, False, True),
        ("auto", True, True, True),
        ("auto", True, False, False),
        (True, True, False, True),
        (False, False, True, False),
    ],
)
def test_train_bf16_auto_takes_fp32_on_a_cpu_without_amx(monkeypatch, value, on_cpu, amx, bf16):
    from horizon.train import worker

    monkeypatch.setattr(worker, "cpu_has_amx", lambda: amx)
    assert worker.use_bf16(value, on_cpu) is bf16
    train = hc.load(REPO / "demo" / "config.yaml")["train"] | {"bf16": value}
    spec = TrainSpec(
        name="k",
        model_init="m",
        tokenizer="m",
        token_shards=[],
        horizon=8,
        output="o",
        checkpoints="c",
        train=train,
        seed=0,
    )
    assert worker.training_arguments(spec, on_cpu=True).bf16 is worker.use_bf16(value, True)


def test_bf16_warning_reaches_the_training_log(tmp_path, caplog, monkeypatch):
    """load_for_training logs it before any weight is read (a model path that does not exist still warns)."""
    import logging

    import torch

    from horizon.train import worker

    monkeypatch.setattr(worker, "cpu_has_amx", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the CPU path, on a GPU host too
    train = hc.load(REPO / "demo" / "config.yaml")["train"] | {"bf16": True}
    spec = TrainSpec(
        name="k",
        model_init=str(tmp_path / "none"),
        tokenizer=str(tmp_path / "none"),
        token_shards=[],
        horizon=8,
        output=str(tmp_path / "o"),
        checkpoints=str(tmp_path / "c"),
        train=train,
        seed=0,
    )
    with caplog.at_level(logging.WARNING, logger="horizon.train.worker"), pytest.raises(OSError):
        worker.load_for_training(spec)
    assert any(
        "train.bf16 is true" in r.getMessage() and "(training k)" in r.getMessage() for r in caplog.records
    )
