import pytest

from horizon.eval.grading.verdict import ParseError, pytest_results
from horizon.eval.tasks.benchmark import TaskError, load_benchmark, load_harbor, load_tb1
from tests.helpers import FIXTURES


def test_harbor_task_fields():
    t = load_harbor(FIXTURES / "harbor-tasks" / "hello")
    assert t.instruction == "Write the word hello to /app/out.txt."
    assert (t.agent_timeout, t.test_timeout, t.memory_mb, t.cpus) == (30.0, 30.0, 1024, 1.0)
    assert t.workdir_files.endswith("environment/files") and t.build_context.endswith("environment")
    assert not t.allow_internet


def test_tb1_task_fields():
    t = load_tb1(FIXTURES / "tb1-tasks" / "hello-tb1")
    assert t.format == "tb1" and t.instruction.startswith("Write the word hello")
    assert (t.agent_timeout, t.test_timeout) == (30.0, 30.0) and t.workdir_files.endswith("app")


def test_malformed_tasks_are_reported_with_file_and_field_and_others_load():
    tasks, errors = load_benchmark(FIXTURES / "harbor-tasks", "harbor")
    assert [t.id for t in tasks] == ["hello", "json-reward", "needs-apt", "two-steps", "uvx-ctrf"]
    by_task = {e["task"]: e for e in errors}
    assert (
        by_task["broken-toml"]["file"] == "task.toml"
        and "not valid TOML" in by_task["broken-toml"]["message"]
    )
    assert (by_task["bad-timeout"]["file"], by_task["bad-timeout"]["field"]) == (
        "task.toml",
        "agent.timeout_sec",
    )
    assert by_task["no-tests"]["file"] == "tests/test.sh"
    with pytest.raises(
        TaskError, match=r"task bad-timeout: task.toml: agent.timeout_sec: expected a positive number"
    ):
        load_harbor(FIXTURES / "harbor-tasks" / "bad-timeout")


def test_missing_benchmark_and_unknown_task_ids(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_benchmark(tmp_path / "nope", "tb1")
    with pytest.raises(FileNotFoundError, match="no task directories ghost"):
        load_benchmark(FIXTURES / "harbor-tasks", "harbor", only=["hello", "ghost"])


def test_pytest_summary_parsing():
    out = """
============================= short test summary info ==============================
PASSED tests/test_outputs.py::test_a
FAILED tests/test_outputs.py::test_b - AssertionError
ERROR tests/test_outputs.py::test_c
========================= 1 failed, 1 passed, 1 error in 0.1s =========================
"""
    assert pytest_results(out) == {
        "test_a": "PASSED",
        "test_b": "FAILED",
        "test_c": "ERROR",
    }  # named as TB1 names them
    with pytest.raises(ParseError, match="no 'short test summary info' section"):
        pytest_results("no tests ran")


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
