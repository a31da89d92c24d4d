import sys

from horizon.train.launch import launch_command, slurm_nodes
from horizon.train.worker import last_complete_checkpoint


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


def test_multi_node_under_slurm_uses_srun_and_c10d_on_the_first_node():
    env = {"SLURM_JOB_ID": "1234", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "gpu[07-08]"}
    cmd = launch_command("/r/spec.json", env, gpus=8, cpu_processes=1)
    assert cmd[:4] == ["srun", "--nodes=2", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    assert "--nproc-per-node=8" in cmd and "--nnodes=2" in cmd and "--rdzv-backend=c10d" in cmd
    assert "--rdzv-endpoint=gpu07:30734" in cmd and "--rdzv-id=1234" in cmd
    assert cmd[-3:] == ["-m", "horizon.train.worker", "/r/spec.json"]
    assert slurm_nodes({"SLURM_JOB_NUM_NODES": "4"}) == 1  # not inside a Slurm job


def test_resume_skips_and_removes_a_partial_checkpoint(tmp_path):
    for step, complete in ((5, True), (10, True), (15, False)):
        d = tmp_path / f"checkpoint-{step}"
        d.mkdir()
        if complete:
            (d / "trainer_state.json").write_text("{}")
    assert last_complete_checkpoint(tmp_path, remove_incomplete=True) == str(tmp_path / "checkpoint-10")
    assert not (tmp_path / "checkpoint-15").exists()
    assert last_complete_checkpoint(tmp_path / "none") is None
