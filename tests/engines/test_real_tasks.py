"""Real tasks as their owners define them, in the real sandboxes: reference solutions of tasks that
COPY or RUN their files into place and grade with uv/uvx/pip offline pass `horizon oracle` under
local and docker, or are named skips; every uv/uvx/pip pattern of the public graders works offline;
multi-step tasks run step by step and are recorded per step; a task the sandbox cannot run is recorded
as unsupported (never a 0). The graders here are written in the shapes of the public ones."""

import shutil

import pytest

from horizon.eval.oracle import run_one
from horizon.eval.tasks.benchmark import load_harbor, load_tb1
from tests.engine_fixtures import dockerd_for
from tests.helpers import FIXTURES

pytestmark = [pytest.mark.engine, pytest.mark.slow(minutes=2)]
PY313 = "ghcr.io/laude-institute/t-bench/python-3-13:20250620"  # a FROM image no registry serves here
MAP = {"image_map": {PY313: "horizon-base:bookworm"}}


@pytest.fixture(params=["local", "docker"])
def sandbox(request, local_engine):
    if request.param == "docker":
        dockerd_for(request)
    return request.param


def harbor(name):
    return load_harbor(FIXTURES / "harbor-tasks" / name)


def tb1(name):
    return load_tb1(FIXTURES / "tb1-tasks" / name)


@pytest.mark.parametrize("task", ["uvx-ctrf", "two-steps", "hello"])
def test_harbor_reference_solutions_pass(sandbox, tools, task):
    r = run_one(sandbox, harbor(task), tools)
    assert (r.status, r.reward) == ("pass", 1.0), r


@pytest.mark.parametrize("task", ["uv-project", "swebench-style", "pip-shell", "hello-tb1"])
def test_tb1_reference_solutions_pass(sandbox, tools, task):
    r = run_one(sandbox, tb1(task), tools, options=MAP if sandbox == "docker" else None)
    assert (r.status, r.reward) == ("pass", 1.0), r


def test_what_a_sandbox_cannot_build_is_a_named_skip(sandbox, tools):
    r = run_one(sandbox, harbor("needs-apt"), tools)
    assert r.status == "skip" and "horizon-no-such-package" in r.why, r
    assert "line 3" in r.why or "Step 3/3" in r.why, r  # local names the Dockerfile's line, docker its step
    if sandbox == "docker":  # a FROM image that cannot be pulled, unless mapped onto a local one
        r = run_one(sandbox, tb1("uv-project"), tools)
        assert r.status == "skip" and PY313 in r.why, r


def test_a_wrong_solution_fails_with_why_and_the_graders_tail(sandbox, tools, tmp_path):
    d = tmp_path / "uvx-ctrf"
    shutil.copytree(FIXTURES / "harbor-tasks" / "uvx-ctrf", d)
    (d / "solution" / "solve.sh").write_text("echo 41 > total.txt\n")
    r = run_one(sandbox, load_harbor(d), tools)
    assert r.status == "FAIL" and r.why.startswith("tests_failed"), r
    assert "FAILED ../tests/test_total.py::test_total_is_the_sum" in r.tail and "short test summary" in r.tail


# each uv/uvx/pip invocation pattern of the public Terminal-Bench v1, 2.0 and Harbor graders, as a test.sh
PATTERNS = {
    "uvx-python-with": "uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest --ctrf /logs/verifier/ctrf.json "
                       "/tests/test_it.py -rA && test -s /logs/verifier/ctrf.json",
    "uvx-long-options": "uvx --python 3.12 --with pytest==8.4.1 --with pytest-json-ctrf pytest /tests/test_it.py -rA",
    "uvx-with-requirements": "printf 'pytest==8.4.1\\n' > /tmp/req.txt && uvx --with-requirements /tmp/req.txt pytest "
                             "/tests/test_it.py -rA",
    "uvx-at-version": "uvx pytest@8.4.1 /tests/test_it.py -rA",
    "uv-init-add-run": "uv init && uv add pytest==8.4.1 && uv run pytest /tests/test_it.py -rA",
    "uv-venv-pip-install": "uv venv .tbench-testing && source .tbench-testing/bin/activate && "
                           "uv pip install pytest==8.4.1 && uv run pytest /tests/test_it.py -rA",
    "uv-run-with": "uv run --with pytest==8.4.1 pytest /tests/test_it.py -rA",
    "uv-tool-run": "uv tool run --from pytest==8.4.1 pytest /tests/test_it.py -rA",
    "uv-run-script": "printf '# /// script\\n# dependencies = [\"pytest==8.4.1\"]\\n# ///\\nimport pytest, sys\\n"
                     "sys.exit(pytest.main([\"/tests/test_it.py\", \"-rA\"]))\\n' > /tmp/run.py && uv run /tmp/run.py",
    "uv-installer-then-uvx": "curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh && source $HOME/.local/bin/env && "
                             "uvx -w pytest==8.4.1 pytest /tests/test_it.py -rA",
    "pip-install": "{ pip3 install pytest==9.2.0 || pip install pytest; } ; python3 -m pytest /tests/test_it.py -rA",
}  # fmt: skip


@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_every_uv_and_pip_pattern_works_offline(sandbox, tools, tmp_path, pattern):
    d = tmp_path / pattern
    for sub in ("environment", "tests", "solution"):
        (d / sub).mkdir(parents=True)
    (d / "task.toml").write_text("[verifier]\ntimeout_sec = 180.0\n[environment]\nmemory_mb = 1024\n")
    (d / "instruction.md").write_text("Write ok to /app/out.txt.")
    (d / "environment" / "Dockerfile").write_text("FROM horizon-base:bookworm\nWORKDIR /app\n")
    (d / "solution" / "solve.sh").write_text("echo ok > /app/out.txt\n")
    (d / "tests" / "test_it.py").write_text(
        "def test_ok():\n    assert open('/app/out.txt').read() == 'ok\\n'\n"
    )
    (d / "tests" / "test.sh").write_text(f"#!/bin/bash\nif {PATTERNS[pattern]}; then echo 1 > /logs/verifier/reward.txt; "
                                         "else echo 0 > /logs/verifier/reward.txt; fi\n")  # fmt: skip
    r = run_one(sandbox, load_harbor(d), tools)
    assert r.status == "pass", r


def test_a_multi_step_attempt_is_recorded_step_by_step(tools):
    """Through the real agent loop (a scripted model): each step its own instruction, its own tests."""
    from horizon.eval.agent.loop import AgentConfig
    from horizon.eval.agent.prompts import Template
    from horizon.eval.attempt import LiveSandboxes, RunContext, run_attempt
    from horizon.terminus import Command, render_response
    from tests.doubles.backends import ScriptedBackend
    from tests.helpers import REPO

    def ans(cmd=None, done=False):
        return render_response("a", "p", [Command(cmd, 0.2)] if cmd else [], done, reasoning="r")

    answers = [ans("echo one > /app/log.txt\n"), ans(done=True), ans(done=True),
               ans("echo two >> /app/log.txt\n"), ans(done=True), ans(done=True)]  # fmt: skip
    ctx = RunContext("local", ScriptedBackend(answers), Template.load(REPO / "demo" / "prompt.yaml"), AgentConfig(),
                     [], {"toolchain": tools})  # fmt: skip
    out = run_attempt(harbor("two-steps"), 0, 0, ctx, 0, LiveSandboxes(), None)
    rec = out.record.to_dict()
    assert rec["success"] and rec["reward"] == 1.0 and rec["episodes"] == 6
    assert [(s["name"], s["reward"], s["success"], s["reward_file"]) for s in rec["steps"]] == [
        ("write", 1.0, True, "reward.txt"), ("append", 1.0, True, "reward.json")]  # fmt: skip
    assert "Write the word one" in out.messages[0]["content"] and any(
        "Append the word two" in m["content"] for m in out.messages[1:])  # fmt: skip
    assert rec["policy"] == {"network": "declared", "same_shell_tests": "fresh"}


def test_a_rollout_records_what_the_sandbox_cannot_run_as_unsupported(tools, tmp_path):
    from horizon.eval.agent.loop import AgentConfig
    from horizon.eval.agent.prompts import Template
    from horizon.eval.attempt import RunContext
    from horizon.eval.rollout import run_repeat
    from tests.doubles.backends import ScriptedBackend
    from tests.helpers import REPO

    ctx = RunContext("local", ScriptedBackend([]), Template.load(REPO / "demo" / "prompt.yaml"), AgentConfig(), [],
                     {"toolchain": tools})  # fmt: skip
    recs = run_repeat([harbor("needs-apt")], 3, 0, ctx, tmp_path / "attempts.jsonl", seed=0)
    assert [(r.failure_mode, r.sandbox, r.success) for r in recs] == [("unsupported", "local", False)] * 3
    assert all("horizon-no-such-package" in r.evidence and "line 3" in r.evidence for r in recs)


@pytest.mark.parametrize("mode", ["fresh", "agent"])
def test_run_tests_in_same_shell_as_the_switch_says(tools, tmp_path, mode):
    """TB1 run_tests_in_same_shell: the tests see the agent's shell only under eval.same_shell_tests = agent;
    the default (a fresh grader) is recorded as a deviation from the task's owner."""
    from horizon.eval.agent.loop import AgentConfig
    from horizon.eval.agent.prompts import Template
    from horizon.eval.attempt import LiveSandboxes, RunContext, run_attempt
    from horizon.terminus import Command, render_response
    from tests.doubles.backends import ScriptedBackend
    from tests.helpers import REPO

    d = tmp_path / "same-shell"
    shutil.copytree(FIXTURES / "tb1-tasks" / "pip-shell", d)
    (d / "tests" / "test_outputs.py").write_text("import os\n\ndef test_in_the_agents_shell():\n"
                                                 "    assert os.environ.get('MARK') == 'agent-shell'\n")  # fmt: skip
    ans = lambda cmd=None, done=False: render_response("a", "p", [Command(cmd, 0.2)] if cmd else [], done)  # noqa: E731
    policy = {"network": "declared", "same_shell_tests": mode}
    ctx = RunContext("local", ScriptedBackend([ans("export MARK=agent-shell\n"), ans(done=True), ans(done=True)]),
                     Template.load(REPO / "demo" / "prompt.yaml"), AgentConfig(), [], {"toolchain": tools},
                     policy=policy)  # fmt: skip
    rec = run_attempt(load_tb1(d), 0, 0, ctx, 0, LiveSandboxes(), None).record.to_dict()
    assert rec["success"] == (mode == "agent"), rec
    tests_deviation = [
        x for x in rec["deviations"] if x.startswith("tests:")
    ]  # (and the network: TB1 gives it)
    assert rec["policy"] == policy and bool(tests_deviation) == (mode == "fresh")


def test_a_directory_of_the_tasks_files_can_be_removed(local_engine, tools, tmp_path):
    """/app's lower layer is the task's files: removing one of its directories works (it used to fail with
    EIO inside the user namespace), as RUN rm -rf does in Dockerfiles that COPY a tree then prune it."""
    from horizon.eval.sandbox import SandboxSpec, make_sandbox

    (tmp_path / "files" / "docs" / "old").mkdir(parents=True)
    (tmp_path / "files" / "docs" / "old" / "a.txt").write_text("a")
    (tmp_path / "files").chmod(0o755)
    with make_sandbox("local", SandboxSpec("rmdir", workdir_files=tmp_path / "files"), toolchain=tools) as sb:
        r = sb.exec("rm -r /app/docs/old && ls -A /app/docs | wc -l")
        assert r.ok and r.stdout.strip() == "0", r


@pytest.mark.parametrize(
    "fmt, script, why",
    [("harbor", "echo the tests ran", "no reward file (/logs/verifier/reward.json or reward.txt)"),
     ("tb1", "echo the tests ran", "pytest parser: no 'short test summary info' section")],
)  # fmt: skip
def test_a_grader_that_leaves_no_verdict_is_a_named_failure(local_engine, tools, tmp_path, fmt, script, why):
    src = FIXTURES / ("harbor-tasks/hello" if fmt == "harbor" else "tb1-tasks/hello-tb1")
    d = tmp_path / "silent"
    shutil.copytree(src, d)
    (d / ("tests/test.sh" if fmt == "harbor" else "run-tests.sh")).write_text(f"#!/bin/bash\n{script}\n")
    r = run_one("local", (load_harbor if fmt == "harbor" else load_tb1)(d), tools)
    assert r.status == "FAIL" and why in r.why and "the tests ran" in r.tail, r
