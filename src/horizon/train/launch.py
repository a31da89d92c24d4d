"""Start training workers: one code path for 1 CPU process, N GPUs and several nodes.

The launching process (the rule's script) writes the examples and the spec once, then starts
`torchrun -m horizon.train.worker SPEC` with as many processes per node as there are GPUs (or
`train.cpu_processes` on a machine without GPUs, on gloo). Under Slurm with several nodes it
starts one torchrun per node through srun, with the c10d rendezvous on the first node of the job
(read from SLURM_JOB_NODELIST); the rule sets the `mpi` resource so that the executor does not
wrap the job in its own `srun -n1`. One process on one node (the demo, one GPU) is started directly
with the environment torchrun would give it (`single_process_env`): the same worker and process
group, without torchrun's agent process and its own import of torch (with `gpu_count`, 3.7 CPU-s
less a launch: bench/train_launch.py).
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from horizon.config import grad_accumulation
from horizon.train.examples import TrainSpec, build_examples

log = logging.getLogger("horizon.train.launch")


def slurm_nodes(env: dict) -> int:
    if not env.get("SLURM_JOB_ID"):
        return 1
    return int(env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES") or 1)


def first_node(env: dict) -> str:
    """The first host of SLURM_JOB_NODELIST (scontrol expands ranges like gpu[01-04])."""
    nodelist = env["SLURM_JOB_NODELIST"]
    try:
        out = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True
        )
        return out.stdout.split()[0]
    except (OSError, subprocess.CalledProcessError):
        head = nodelist.split(",")[0]
        if "[" in head:
            prefix, rng = head.split("[", 1)
            return prefix + rng.split("-")[0].split(",")[0].rstrip("]")
        return head


def launch_command(
    spec_path: str, env: dict, gpus: int, cpu_processes: int, module: str = "horizon.train.worker"
) -> list[str]:
    nodes = slurm_nodes(env)
    per_node = gpus if gpus > 0 else cpu_processes
    torchrun = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={per_node}"]
    worker = ["-m", module, spec_path]
    if nodes > 1:
        port = 29500 + int(env["SLURM_JOB_ID"]) % 2000
        return [
            "srun",
            f"--nodes={nodes}",
            "--ntasks-per-node=1",
            "--kill-on-bad-exit=1",
            *torchrun,
            f"--nnodes={nodes}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={first_node(env)}:{port}",
            f"--rdzv-id={env['SLURM_JOB_ID']}",
            *worker,
        ]
    if per_node == 1:
        return [sys.executable, *worker]  # with single_process_env
    return [*torchrun, "--standalone", "--nnodes=1", *worker]


def single_process_env(env: dict) -> dict:
    """What torchrun --standalone gives its one worker: rank 0 of a world of 1. MASTER_PORT 0: the worker,
    rank 0, opens the process group's store on a port the kernel picks (nobody else joins a world of 1),
    so no port chosen here can be taken in between."""
    ranks = dict.fromkeys(("RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK"), "0")
    sizes = dict.fromkeys(("WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE"), "1")
    parity = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": env.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")}
    return {**env, **ranks, **sizes, **parity, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "0"}


# where a GPU shows before CUDA has started: NVIDIA's control device, its loaded kernel driver (a headless
# machine may create /dev/nvidia* only when CUDA first starts), AMD's (ROCm) kernel driver, WSL 2's GPU
GPU_DEVICE_NODES = ("/dev/nvidiactl", "/proc/driver/nvidia", "/dev/kfd", "/dev/dxg")


def gpu_count(device_nodes=GPU_DEVICE_NODES) -> int:
    """torch's count of GPUs; 0 without importing torch (about 1.3 CPU-s) where no sign of a GPU exists."""
    if not any(os.path.exists(p) for p in device_nodes):
        return 0
    import torch

    return torch.cuda.device_count()


def world_size(env: dict, gpus: int, cpu_processes: int) -> int:
    """Processes of the whole job: nodes (Slurm) x processes per node (GPUs, or CPU processes)."""
    return slurm_nodes(env) * (gpus if gpus > 0 else cpu_processes)


def check_batch(spec: TrainSpec, env: dict, gpus: int) -> int:
    """The gradient accumulation this machine needs for train.global_batch (an error naming the values)."""
    t = spec.train
    world = world_size(env, gpus, t["cpu_processes"])
    device = f"{gpus} GPUs" if gpus else f"{t['cpu_processes']} CPU processes"
    where = f" ({spec.name}: {slurm_nodes(env)} node(s) x {device})"
    return grad_accumulation(t["global_batch"], world, t["per_device_batch"], where)


def save_spec(spec) -> Path:
    """The spec beside the checkpoints, where every worker reads it; its path."""
    ckpt = Path(spec.checkpoints)
    ckpt.mkdir(parents=True, exist_ok=True)
    spec_path = ckpt / "spec.json"
    spec.save(spec_path)
    return spec_path


def worker_env(env: dict, processes: int, threads: int, log_path: str | None) -> dict:
    env = dict(env)
    env["OMP_NUM_THREADS"] = str(max(1, threads // processes))
    env["TOKENIZERS_PARALLELISM"] = "false"
    if log_path:
        env["HORIZON_LOG"] = str(Path(log_path).resolve())
    return env


def train_model(spec: TrainSpec, threads: int = 1, log_path: str | None = None) -> None:
    """SFT: the examples written once (after the global batch is checked), then the workers."""
    run_workers(spec, threads, log_path, prepare=lambda: build_examples(spec))


def run_workers(
    spec,
    threads: int = 1,
    log_path: str | None = None,
    module: str = "horizon.train.worker",
    prepare: Callable[[], None] | None = None,
) -> None:
    """Run `module` on the spec with torchrun (srun + torchrun per node; the worker alone for one process):
    SFT's worker, or DMPO's.
    The global batch is checked first, so a bad split fails before `prepare` (the examples) runs."""
    gpus = gpu_count()
    accumulation = check_batch(spec, dict(os.environ), gpus)
    if prepare is not None:
        prepare()
    spec_path = save_spec(spec)
    env = worker_env(os.environ, gpus or spec.train["cpu_processes"], threads, log_path)
    cmd = launch_command(str(spec_path), env, gpus, spec.train["cpu_processes"], module)
    if world_size(env, gpus, spec.train["cpu_processes"]) == 1:  # the worker alone (launch_command)
        env = single_process_env(env)
    log.info(
        "%s: global batch %d = %d processes x %d per device x %d accumulation; %s",
        spec.name,
        spec.train["global_batch"],
        world_size(env, gpus, spec.train["cpu_processes"]),
        spec.train["per_device_batch"],
        accumulation,
        shlex.join(cmd),
    )
    proc = subprocess.run(cmd, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"training {spec.name} failed (exit {proc.returncode}); its log says why")
    if not Path(spec.output).is_dir():
        raise RuntimeError(f"training {spec.name} ended without writing {spec.output}")
