"""A real single-node Slurm, started by the test itself: the demo's data and training rules run through
`--profile` with the snakemake-executor-plugin-slurm for real (sbatch, squeue, srun)."""

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.engine_fixtures import ensure_debian_package, ensure_root
from tests.helpers import REPO, snakemake, tiny_demo_config

pytestmark = [pytest.mark.engine, pytest.mark.slow(minutes=4)]


def _pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    ensure_root("starting slurmctld, slurmd and munged")
    for binary, pkg in (
        ("slurmctld", "slurmctld"),
        ("slurmd", "slurmd"),
        ("sbatch", "slurm-client"),
        ("munged", "munge"),
    ):
        ensure_debian_package(binary, pkg)
    scratch = tmp_path_factory.mktemp("slurm")
    scratch.chmod(0o755)
    host = socket.gethostname().split(".")[0]
    mem = int(next(x for x in open("/proc/meminfo") if x.startswith("MemTotal")).split()[1]) // 1024 - 2048
    cpus = os.cpu_count()
    for i in range(4):
        (scratch / f"gpu{i}").touch()
    conf = Path("/etc/slurm/slurm.conf")
    gres_conf = conf.parent / "gres.conf"
    backup = conf.read_text() if conf.exists() else None
    gres_backup = gres_conf.read_text() if gres_conf.exists() else None
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(f"""# written by tests/engines/test_slurm.py
ClusterName=horizon
SlurmctldHost={host}
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
MinJobAge=600
ReturnToService=2
GresTypes=gpu
StateSaveLocation={scratch}/state
SlurmdSpoolDir={scratch}/spool
SlurmctldPidFile={scratch}/slurmctld.pid
SlurmdPidFile={scratch}/slurmd.pid
SlurmctldLogFile={scratch}/slurmctld.log
SlurmdLogFile={scratch}/slurmd.log
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem} Gres=gpu:4 State=UNKNOWN
PartitionName=main Nodes={host} Default=YES MaxTime=INFINITE State=UP
""")
    gres_conf.write_text(f"Name=gpu File={scratch}/gpu[0-3]\n")
    key = Path("/etc/munge/munge.key")
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True)
        key.write_bytes(os.urandom(1024))
        shutil.chown(key, "munge", "munge")
        key.chmod(0o400)
    Path("/run/munge").mkdir(parents=True, exist_ok=True)
    shutil.chown("/run/munge", "munge", "munge")
    started = []
    if subprocess.run(["pgrep", "-x", "munged"], capture_output=True).returncode != 0:
        subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/munged"], check=True)
        started.append(Path("/run/munge/munged.pid"))
    for d in ("state", "spool"):
        (scratch / d).mkdir()
    subprocess.run(["slurmctld"], check=True)
    started.append(scratch / "slurmctld.pid")
    subprocess.run(["slurmd"], check=True)
    started.append(scratch / "slurmd.pid")
    deadline = time.time() + 60
    state = ""
    while time.time() < deadline:
        state = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True).stdout.strip()
        if state == "idle":
            break
        time.sleep(0.5)
    assert state == "idle", (
        f"slurm did not come up: {state!r}\n{(scratch / 'slurmctld.log').read_text()[-2000:]}"
    )
    yield scratch
    stopped = []
    for pidfile in reversed(started):  # stop what we started, by pid
        pid = _pid(pidfile)
        if pid:
            try:
                os.kill(pid, 15)
                stopped.append(pid)
            except ProcessLookupError:
                pass
    deadline = time.time() + 30  # until they are gone (not a fixed pause)
    while time.time() < deadline and any(os.path.exists(f"/proc/{pid}") for pid in stopped):
        time.sleep(0.1)
    # put the machine's Slurm configuration back: with a config naming a stopped controller, every
    # later snakemake call would wait ~10 s (the slurm plugin runs `scontrol show config` at start-up)
    for path, old in ((conf, backup), (gres_conf, gres_backup)):
        if old is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(old)


def test_data_and_training_rules_through_the_slurm_executor(slurm, tmp_path, tools):
    cfg = tiny_demo_config(tmp_path)
    target = "results/models/single-K192"
    t = time.monotonic()
    snakemake(
        [
            "--profile",
            str(REPO / "tests" / "slurm-ci"),
            "--configfile",
            str(cfg),
            "--directory",
            str(tmp_path),
            target,
        ],
        timeout=1500,
    )
    slurm_s = time.monotonic() - t
    assert (tmp_path / target / "model.safetensors").exists()
    timing = json.loads((tmp_path / target / "timing.json").read_text())
    assert timing["global_step"] > 0
    logs = list((tmp_path / "results/logs/slurm").rglob("*.log"))
    assert any("rule_train_single" in str(p) for p in logs) and any("rule_tokenize" in str(p) for p in logs)
    # the fake GPU request reached the job (gres from the profile, through a real slurmctld): the job's
    # record in slurmctld (kept for MinJobAge) shows the GPU it was allocated
    train_job = next(p for p in logs if "rule_train_single" in str(p)).stem
    job = subprocess.run(
        ["scontrol", "show", "job", train_job], capture_output=True, text=True, check=True
    ).stdout
    # (slurm versions print it as the allocated TRES, gres/gpu=1, or as the per-node request, gres:gpu:1)
    assert any(f in job for f in ("gres/gpu=1", "gres/gpu:1", "TresPerNode=gres:gpu:1")), job
    print(f"\nslurm: {slurm_s:.0f} s through the executor")
