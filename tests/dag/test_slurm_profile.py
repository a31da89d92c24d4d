"""The cluster profile: the sbatch lines that each rule's resources produce, built with the plugin's own
submit-string builder (no Slurm needed), for one node and for several."""

import re
import shlex

import pytest
from snakemake_executor_plugin_slurm.submit_string import get_submit_command
from snakemake_executor_plugin_slurm.utils import set_gres_string

from horizon.train.launch import launch_command
from tests.helpers import REPO, snakemake


class Res(dict):
    __getattr__ = dict.__getitem__


class Job:
    def __init__(self, name, threads, resources):
        self.name, self.threads, self.resources = name, threads, Res(resources)


def planned_jobs(target: str, env: dict | None = None) -> dict[str, Job]:
    """rule -> (threads, resources) as `snakemake --profile slurm -n` plans them."""
    import tempfile

    with tempfile.TemporaryDirectory() as empty:  # the repository's own results/ must not count
        cfg = ["--configfile", str(REPO / "config.yaml"), "--directory", empty]
        out = snakemake(["--profile", "slurm", *cfg, "-n", target], cwd=REPO, env=env).stdout
    jobs = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", out):
        m = re.match(r"(?:local)?rule (\w+):", block)
        r = re.search(r"^\s+resources: (.*)$", block, re.M)
        if not m or not r:
            continue
        res = {}
        for kv in r.group(1).split(", "):
            k, v = kv.split("=", 1)
            res[k] = int(v) if v.isdigit() else v
        t = re.search(r"^\s+threads: (\d+)$", block, re.M)
        jobs[m.group(1)] = Job(m.group(1), int(t.group(1)) if t else 1, res)
    return jobs


def sbatch(job: Job) -> str:
    params = {
        "run_uuid": "uuid",
        "slurm_logfile": "log",
        "comment_str": "c",
        "account": "",
        "partition": "",
        "workdir": "/w",
    }
    return get_submit_command(job, params) + set_gres_string(job)


def flags(cmd: str) -> list[str]:
    return shlex.split(cmd)


def test_single_node_gpu_and_cpu_rules():
    jobs = planned_jobs("results/tables/reliability.md")
    train = flags(sbatch(jobs["train_single"]))
    # the paper's 4 GPUs by default: train.global_batch 4 = 4 GPUs x batch 1, no accumulation
    assert "--gres=gpu:4" in train and "--nodes=1" in train and "--cpus-per-task=32" in train
    assert ["--mem", "900000"] == train[train.index("--mem") : train.index("--mem") + 2]
    assert ["-t", "4320"] == train[train.index("-t") : train.index("-t") + 2]
    assert not any(f.startswith("--ntasks-per-gpu") for f in train)  # one launcher, torchrun spawns the ranks
    for rule in ("score", "rollout"):
        f = flags(sbatch(jobs[rule]))
        assert "--gres=gpu:1" in f, rule
    assert "--cpus-per-task=16" in flags(sbatch(jobs["rollout"]))
    norm = flags(sbatch(jobs["normalize"]))
    assert not any("gres" in x or "gpu" in x for x in norm) and "--ntasks=1" in norm
    tok = flags(sbatch(jobs["tokenize"]))
    assert (
        "--cpus-per-task=8" in tok and ["--mem", "32000"] == tok[tok.index("--mem") : tok.index("--mem") + 2]
    )


def test_site_settings_from_the_environment_and_multi_node_training():
    env = {
        "HORIZON_TRAIN_NODES": "2",
        "HORIZON_GPU_MODEL": "h100",
        "HORIZON_GPUS_PER_NODE": "2",  # 2 nodes x 2 GPUs = the paper's global batch 4
        "HORIZON_SLURM_ACCOUNT": "proj42",
        "HORIZON_SLURM_GPU_PARTITION": "gpu",
        "HORIZON_SLURM_PARTITION": "cpu",
    }
    jobs = planned_jobs("results/tables/reliability.md", env)
    t = jobs["train_single"]
    f = flags(sbatch(t))
    assert "--gres=gpu:h100:2" in f and "--nodes=2" in f and "--ntasks=2" in f and "--cpus-per-task=16" in f
    assert not any(x.startswith("--ntasks-per-gpu") for x in f)
    assert t.resources["mpi"] == "srun" and t.resources["slurm_partition"] == "gpu"
    assert (
        t.resources["slurm_account"] == "proj42" and jobs["normalize"].resources["slurm_partition"] == "cpu"
    )
    # inside that allocation the rule starts one torchrun per node, rendezvous on the first node
    cmd = launch_command(
        "spec.json",
        {"SLURM_JOB_ID": "77", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "gpu[003-004]"},
        gpus=2,
        cpu_processes=1,
    )
    assert cmd[:4] == ["srun", "--nodes=2", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    assert "--nproc-per-node=2" in cmd and "--rdzv-endpoint=gpu003:29577" in cmd


def test_unset_site_settings_leave_the_plugin_defaults():
    jobs = planned_jobs("results/models/single-K4096")
    t = jobs["train_single"]
    assert (
        "slurm_account" not in t.resources
        and "slurm_partition" not in t.resources
        and "mpi" not in t.resources
    )


@pytest.mark.parametrize("bad", ["0", "x"])
def test_a_bad_node_count_is_refused(bad):
    proc = snakemake(
        ["--profile", "slurm", "-n", "results/models/single-K4096"],
        cwd=REPO,
        check=False,
        env={"HORIZON_TRAIN_NODES": bad},
    )
    assert proc.returncode != 0
    assert f"HORIZON_TRAIN_NODES must be a positive integer, got '{bad}'" in proc.stdout + proc.stderr


def test_a_profile_whose_gpus_do_not_divide_the_global_batch_fails_at_parse_time(tmp_path):
    import yaml

    target = ["--profile", "slurm", "-n", "results/models/single-K4096"]
    proc = snakemake(target, cwd=REPO, check=False, env={"HORIZON_GPUS_PER_NODE": "8"})
    assert proc.returncode != 0
    assert (
        "train.global_batch: 4 is not a multiple of world size 8 x train.per_device_batch 1 = 8 "
        "(rule train_single: 8 GPUs x 1 node(s) in the profile)" in proc.stdout + proc.stderr
    )
    # a global batch of 8 plans on 8 GPUs per node (no accumulation), or on 2 nodes of 4
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["train"]["global_batch"] = 8
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    for env in ({"HORIZON_GPUS_PER_NODE": "8"}, {"HORIZON_TRAIN_NODES": "2"}):
        snakemake([*target, "--configfile", str(tmp_path / "c.yaml")], cwd=REPO, env=env)


# the rules whose thread count is a config key (how much work is in flight); every other rule declares none
CONFIG_THREADS = {'config["tokenize"]["threads"]', 'SYNTH["concurrency"]', '_collect["concurrency"]'}


def test_thread_counts_live_in_the_profiles():
    declared = [
        (path.name, m.group(1))
        for path in sorted((REPO / "workflow" / "rules").glob("*.smk"))
        for m in re.finditer(r"^\s+threads:\s*(.+?)\s*$", path.read_text(), re.M)
    ]
    assert {value for _, value in declared} == CONFIG_THREADS, declared
