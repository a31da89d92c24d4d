"""The `horizon` command: check-tasks names each task and what a sandbox cannot run; base-image (the
docker sandbox's base image without a registry; the build itself runs in tests/engines, where the
dockerd fixture makes it) names a daemon it cannot reach."""

import pytest

from horizon.cli import main
from tests.helpers import FIXTURES


def test_check_tasks_prints_each_task_and_names_file_and_field_of_the_malformed(capsys):
    from horizon.cli import main

    rc = main(["check-tasks", str(FIXTURES / "harbor-tasks")])
    out = capsys.readouterr().out.splitlines()
    assert rc == 1  # malformed tasks make the check fail
    assert "ok     hello  (agent 30 s, tests 30 s, workdir /app)" in out
    assert any(line.startswith("ok     json-reward") for line in out)
    assert "ERROR  bad-timeout: task.toml: agent.timeout_sec: expected a positive number, got 'soon'" in out
    assert "ERROR  no-tests: tests/test.sh: -: missing" in out
    assert out[-1] == "8 task directories: 5 ok, 0 unsupported, 3 malformed"
    assert main(["check-tasks", str(FIXTURES / "tb1-tasks"), "--format", "tb1"]) == 0


def test_task_commands_read_the_format_from_the_tasks(capsys, tmp_path):
    """check-tasks, oracle and collect as init: task.yaml is tb1, task.toml harbor, --format overrides."""
    assert main(["check-tasks", str(FIXTURES / "tb1-tasks")]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[-1] == "4 task directories: 4 ok, 0 unsupported, 0 malformed"
    assert "tb1 tasks (read from them" in captured.err
    with pytest.raises(SystemExit, match=r"horizon oracle: .*: no task directory holds task.yaml"):
        main(["oracle", str(tmp_path)])
    assert main(["check-tasks", str(FIXTURES / "tb1-tasks"), "--format", "harbor"]) == 1  # as told
    assert capsys.readouterr().out.splitlines()[-1] == "4 task directories: 0 ok, 0 unsupported, 4 malformed"


def test_check_tasks_names_what_a_sandbox_cannot_run(capsys):
    from horizon.cli import main

    assert (
        main(["check-tasks", str(FIXTURES / "harbor-tasks"), "--sandbox", "local"]) == 1
    )  # the malformed ones
    out = capsys.readouterr().out.splitlines()
    assert (
        "skip   needs-apt  unsupported by the local sandbox: Dockerfile: line 3: RUN: apt-get install of "
        "horizon-no-such-package, which the host (the stand-in image) lacks"
    ) in out
    assert "ok     two-steps  (agent none, tests 600 s, workdir /app, 2 steps)" in out
    assert out[-1] == "8 task directories: 4 ok, 1 unsupported by the local sandbox, 3 malformed"


def test_base_image_without_a_daemon_is_a_named_error(tmp_path, monkeypatch, capsys):
    sock = tmp_path / "no-daemon.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{sock}")
    assert main(["base-image", "--tag", "horizon-base:test"]) == 1
    err = capsys.readouterr().err
    assert (
        err.startswith("horizon base-image: cannot reach the Docker daemon at unix://") and str(sock) in err
    )
    assert "Traceback" not in err


def test_base_image_options(capsys):
    with pytest.raises(SystemExit) as e:
        main(["base-image", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert all(opt in out for opt in ("--tag", "--suite", "--mirror", "--workdir", "horizon-base:bookworm"))
