"""The Apptainer backend's command lines (Apptainer is not packaged for Debian 12: no engine test here)."""

import subprocess
from pathlib import Path

import pytest

from horizon.eval.sandbox import SandboxError, SandboxSpec
from horizon.eval.sandbox.apptainer.sandbox import ApptainerSandbox


def sandbox(overlay=False, **kw):
    sb = ApptainerSandbox(
        SandboxSpec(name="t", image=kw.pop("image", "ghcr.io/x/task:1"), **kw),
        toolchain="/tools",
        overlay=overlay,
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


# -- as root: a directory overlay, audited from the host ------------------------------------------------

IMAGE = {"/usr": "D", "/usr/bin": "D", "/usr/bin/bash": b"ELF bash", "/usr/lib": "D",
         "/usr/lib/python3": "D", "/usr/lib/python3/dist-packages": "D", "/tmp": "D", "/bin": "L usr/bin"}  # fmt: skip


class FakeApptainer:
    """`apptainer` as the sandbox calls it: instance start/stop recorded, exec of the image answered."""

    def __init__(self):
        self.calls = []

    def __call__(self, argv, **kw):
        self.calls.append(argv)
        out = b""
        if argv[1] == "exec" and "-c" in argv:  # the KINDS batch, in a fresh container of the image
            paths = argv[argv.index("-c") + 3 :]
            lines = []
            for p in paths:
                e = IMAGE.get(p)
                lines.append("-" if e is None else "F" if isinstance(e, bytes) else e)
            out = "".join(x + "\n" for x in lines).encode()
        elif argv[1] == "exec" and argv[-2] == "--":
            out = IMAGE[argv[-1]]
        text = kw.get("text")
        return subprocess.CompletedProcess(argv, 0, out.decode() if text else out, "" if text else b"")


@pytest.fixture
def rooted(tmp_path, monkeypatch):
    fake = FakeApptainer()
    monkeypatch.setattr(subprocess, "run", fake)
    sb = sandbox(overlay=True)
    sb.root = tmp_path
    for d in ("app", "tests", "logs", "overlay/upper"):
        (tmp_path / d).mkdir(parents=True)
    sb.running = True
    return sb, fake, tmp_path / "overlay" / "upper"


def test_as_root_the_instance_gets_a_directory_overlay():
    argv = sandbox(overlay=True).start_argv("/a")
    assert argv[argv.index("--overlay") + 1] == "/scratch/sb/overlay" and "--writable-tmpfs" not in argv


def test_as_root_a_replaced_shell_is_tampered(rooted):
    sb, fake, upper = rooted
    (upper / "usr/bin").mkdir(parents=True)
    (upper / "usr/bin/bash").write_text("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n")
    sb.kill_agent()
    assert fake.calls[-1] == sb.stop_argv() and not sb.running  # the instance stopped: nothing of it runs
    found = sb.audit()
    assert (
        found.failure_mode == "tampered" and "/usr/bin/bash: a program of the image changed" in found.evidence
    )


def test_as_root_honest_changes_pass_and_the_guard_gets_the_site_changes(rooted):
    sb, fake, upper = rooted
    site = upper / "usr/lib/python3/dist-packages"
    (site / "demo-1.0.dist-info").mkdir(parents=True)
    (site / "demo-1.0.dist-info/entry_points.txt").write_text("[pytest11]\ndemo = demo\n")
    (upper / "tmp").mkdir()
    (upper / "tmp/scratch.txt").write_text("work")
    (sb.root / "outside").write_text("host file")
    (sb.root / "logs" / ".horizon-pytest-guard.changed").symlink_to(sb.root / "outside")
    sb.kill_agent()
    assert sb.audit() is None
    listed = (sb.root / "logs" / ".horizon-pytest-guard.changed").read_text().split()
    assert listed == ["/usr/lib/python3/dist-packages/demo-1.0.dist-info/entry_points.txt"]
    assert (sb.root / "outside").read_text() == "host file"  # the link the agent left in /logs: not followed
    assert sb.image_env()["HORIZON_PYTEST_GUARD_CHANGED"] == "/logs/.horizon-pytest-guard.changed"
    first = sb.name
    sb.resume()  # a new instance over the same overlay directory
    start = fake.calls[-1]
    assert start[:3] == ["apptainer", "instance", "start"] and start[-1] == sb.name != first
    assert start[start.index("--overlay") + 1] == f"{sb.root}/overlay"


def test_without_root_kill_all_inside_and_the_image_not_audited(tmp_path, monkeypatch):
    from horizon.eval.sandbox import ExecResult

    monkeypatch.setattr(subprocess, "run", FakeApptainer())
    sb = sandbox(overlay=False)
    sb.root = tmp_path
    (tmp_path / "app").mkdir()
    seen = []
    monkeypatch.setattr(sb, "exec", lambda argv, **kw: seen.append(argv) or ExecResult(0, "", ""))
    sb.kill_agent()
    assert seen and "kill -9 -1" in seen[0][-1] and sb.audit() is None


def test_a_shell_planted_in_apps_path_directory_is_tampered_root_or_not(tmp_path, monkeypatch):
    """/app is the host's directory the agent writes: a PATH directory there is scanned at start and
    before the tests (not in the overlay), and a bash planted in front of the image's is tampered."""
    monkeypatch.setattr(subprocess, "run", FakeApptainer())
    sb = sandbox(overlay=False, env={"PATH": "/app/bin:/usr/bin:/bin"})
    sb.root = tmp_path
    (tmp_path / "app" / "bin").mkdir(parents=True)
    (tmp_path / "app" / "bin" / "mytool").write_text("the task's own")
    sb._app_before = sb._scan_app()
    assert set(sb._app_before) == {"/app/bin", "/app/bin/mytool"}
    (tmp_path / "app" / "bin" / "mytool").write_text("the agent's fix")
    assert sb.audit() is None  # the task's own program, changed: shadows nothing
    (tmp_path / "app" / "bin" / "bash").write_text("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n")
    found = sb.audit()
    assert (
        found.failure_mode == "tampered"
        and "/app/bin/bash: a program added in front of /usr/bin/bash" in found.evidence
    )
