"""The Apptainer backend's command lines (Apptainer is not packaged for Debian 12: no engine test here)."""

from pathlib import Path

import pytest

from horizon.eval.sandbox import SandboxError, SandboxSpec
from horizon.eval.sandbox.apptainer.sandbox import ApptainerSandbox


def sandbox(**kw):
    sb = ApptainerSandbox(
        SandboxSpec(name="t", image=kw.pop("image", "ghcr.io/x/task:1"), **kw), toolchain="/tools"
    )
    sb.root = Path("/scratch/sb")
    return sb


def test_instance_start_line():
    sb = sandbox()
    argv = sb.start_argv("/scratch/sb/app")
    assert argv[:3] == ["apptainer", "instance", "start"]
    for flag in ("--containall", "--writable-tmpfs", "--no-home", "--cleanenv"):
        assert flag in argv
    assert "--nv" not in argv  # sandboxes never get the GPU
    assert argv[argv.index("--bind") + 1] == (
        "/scratch/sb/app:/app,/scratch/sb/tests:/tests,/scratch/sb/logs:/logs,/tools:/opt/horizon:ro"
    )
    assert argv[-2:] == ["docker://ghcr.io/x/task:1", sb.name]
    assert argv[argv.index("--network") + 1] == "none"


def test_internet_tasks_and_sif_images():
    sb = sandbox(image="/images/task.sif", allow_internet=True)
    argv = sb.start_argv("/a")
    assert "--network" not in argv and argv[-2] == "/images/task.sif"


def test_exec_and_stop_lines():
    sb = sandbox()
    argv = sb.exec_argv(["bash", "/tests/test.sh"], "/app", {"TEST_DIR": "/tests"}, 30)
    assert argv == [
        "apptainer",
        "exec",
        "--cleanenv",
        "--pwd",
        "/app",
        "--env",
        "TEST_DIR=/tests",
        f"instance://{sb.name}",
        "timeout",
        "-k",
        "2",
        "30",
        "bash",
        "/tests/test.sh",
    ]
    assert sb.stop_argv() == ["apptainer", "instance", "stop", "--force", sb.name]


def test_a_dockerfile_only_task_needs_an_image_first():
    sb = ApptainerSandbox(SandboxSpec(name="t", dockerfile_dir=Path("/task/environment")))
    with pytest.raises(SandboxError, match="build and convert it first"):
        sb.image_ref()
