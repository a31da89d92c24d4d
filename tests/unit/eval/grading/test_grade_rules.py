"""The rules the grade rests on, without an engine: the verdict on every audit finding (the tests never
run, whatever they would say), and each isolation variable of the grader's environment by what it
does to a real Python and pytest (not by the values in the dict), each beside its control."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from horizon.eval.grading.grader import grade
from horizon.eval.sandbox import ExecResult, Finding
from horizon.eval.sandbox.toolchain import grader_env
from horizon.eval.tasks.benchmark import load_harbor, load_tb1
from tests.helpers import FIXTURES
from tests.unit.eval.sandbox.programs.test_pytest_guard import setup  # noqa: F401 (a fixture)

HELLO = FIXTURES / "harbor-tasks" / "hello"
HELLO_TB1 = FIXTURES / "tb1-tasks" / "hello-tb1"
SAME_SHELL = FIXTURES / "tb1-tasks" / "pip-shell"  # run_tests_in_same_shell: true


class ForgingSandbox:
    """A sandbox whose tests would pass (reward 1, pytest's summary all passed) and whose audit says
    `finding`: what grade() does with each step is recorded."""

    workdir = "/app"

    def __init__(self, finding: Finding | None, session: bool = True):
        self.finding, self.calls, self.argvs, self.session = finding, [], [], session

    def settle(self, seconds):
        self.calls.append("settle")

    def kill_agent(self):
        self.calls.append("kill_agent")

    def audit(self):
        self.calls.append("audit")
        return self.finding

    def reset_for_grading(self, archive):
        self.calls.append("reset_for_grading")
        return "/opt/horizon/home"

    def image_env(self):
        return {}

    def exec(self, argv, **kw):
        self.calls.append("exec")
        self.argvs.append(argv)
        if argv[:2] == ["tmux", "send-keys"] and not self.session:
            return ExecResult(1, "", "no server running")
        return ExecResult(0, PASSED, "")

    def read_first(self, paths, cap):
        self.calls.append("read_first")
        return paths[-1], b"1\n", ""


PASSED = "=== short test summary info ===\nPASSED test_outputs.py::test_hello\n=== 1 passed in 0.01s ===\n"
FINDINGS = [
    Finding("tampered", "the agent changed what grades it: /usr/bin/bash: a program of the image changed"),
    Finding("sandbox_exhausted", "its writable layer reached 300 MB (storage_mb 256)"),
]


@pytest.mark.parametrize("task", [HELLO, HELLO_TB1, SAME_SHELL], ids=["harbor", "tb1", "tb1-same-shell"])
@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.failure_mode)
@pytest.mark.parametrize("agent_shell", [False, True], ids=["fresh-shell", "agent-shell"])
def test_every_audit_finding_fails_the_attempt_and_no_test_runs(task, finding, agent_shell):
    load = load_harbor if task == HELLO else load_tb1
    control = ForgingSandbox(None)  # no finding: these tests pass
    assert grade(load(task), control, agent_shell=agent_shell).success
    sb = ForgingSandbox(finding)
    g = grade(load(task), sb, agent_shell=agent_shell)
    assert (g.success, g.reward, g.failure_mode, g.evidence) == (
        False,
        0.0,
        finding.failure_mode,
        finding.evidence,
    )
    assert g.detail == {"audit": finding.failure_mode}
    assert "exec" not in sb.calls and "reset_for_grading" not in sb.calls and "read_first" not in sb.calls


def test_same_shell_tests_are_typed_into_the_agents_shell_and_fall_back_to_a_fresh_one():
    """eval.same_shell_tests = agent: the agent is not killed first, the tests are typed into its tmux
    session and their output read back; with the session gone, the agent is killed and a fresh shell runs them."""
    from horizon.eval.agent.terminal import SESSION
    from horizon.eval.grading.grader import IN_AGENT_SHELL, RUN_SCRIPT

    sb = ForgingSandbox(None)
    g = grade(load_tb1(SAME_SHELL), sb, timeout=7, agent_shell=True)
    assert g.success and g.detail["rc"] == 0 and "1 passed" in g.output
    assert sb.calls[:3] == ["settle", "audit", "reset_for_grading"]  # nothing killed before the tests
    assert sb.argvs[:3] == [
        ["tmux", "send-keys", "-t", SESSION, IN_AGENT_SHELL, "Enter"],
        ["tmux", "wait-for", "horizon-tests"],
        ["sh", "-c", "cat /logs/verifier/tests.out"],
    ]
    assert sb.calls[-1] == "kill_agent"
    assert "bash /tests/run-tests.sh > /logs/verifier/tests.out" in IN_AGENT_SHELL
    gone = ForgingSandbox(None, session=False)
    assert grade(load_tb1(SAME_SHELL), gone, agent_shell=True).success
    assert gone.calls.count("kill_agent") == 2 and gone.argvs[1] == [
        "sh",
        "-c",
        RUN_SCRIPT,
        "/tests/run-tests.sh",
    ]
    fresh = ForgingSandbox(None)  # eval.same_shell_tests off: a fresh shell, the agent killed first
    grade(load_tb1(SAME_SHELL), fresh, agent_shell=False)
    assert fresh.calls[:2] == ["settle", "kill_agent"] and fresh.argvs[0][:3] == ["sh", "-c", RUN_SCRIPT]


# -- the grader's environment, each variable by its effect -------------------------------------------

BASE = getattr(sys, "_base_executable", sys.executable)  # a venv's Python has no user site of its own


def python(env: dict, code: str, cwd: Path, *flags: str) -> str:
    r = subprocess.run(
        [BASE, *flags, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )
    return r.stdout + r.stderr


def user_site(home: Path) -> Path:
    out = python(
        {"HOME": str(home), "PATH": os.environ["PATH"]},
        "import site; print(site.getusersitepackages())",
        home,
    )
    return Path(out.strip())


def grader(home: Path, image_home: Path, drop: tuple[str, ...] = (), **over) -> dict:
    env = grader_env(str(home), {"HOME": str(image_home), "PATH": os.environ["PATH"]})
    env.update(over)
    for k in drop:
        env.pop(k)
    return env


def test_the_user_site_is_closed_twice_a_fresh_home_and_no_user_site(tmp_path):
    """The agent's usercustomize in its HOME's user site: the fresh HOME alone keeps it out, and
    PYTHONNOUSERSITE alone does too (a second line: each one's removal is caught by the other)."""
    agent, fresh = tmp_path / "root", tmp_path / "fresh"
    agent.mkdir()
    fresh.mkdir()
    site = user_site(agent)
    site.mkdir(parents=True)
    (site / "usercustomize.py").write_text("print('AGENT-CODE')\n")
    code = "print('grader')"
    assert "AGENT-CODE" not in python(grader(fresh, agent), code, tmp_path)
    # the probe bites: the agent's HOME and the user site on
    assert "AGENT-CODE" in python(
        grader(fresh, agent, ("PYTHONNOUSERSITE",), HOME=str(agent)), code, tmp_path
    )
    # each line alone
    assert "AGENT-CODE" not in python(grader(fresh, agent, ("PYTHONNOUSERSITE",)), code, tmp_path)
    assert "AGENT-CODE" not in python(grader(fresh, agent, HOME=str(agent)), code, tmp_path)


def test_the_working_directory_is_not_on_pythons_path(tmp_path):
    """PYTHONSAFEPATH: the agent's pytest.py in the task's directory (the grader's cwd) is not imported."""
    (tmp_path / "pytest.py").write_text("print('AGENT-CODE')\n")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    code = "import importlib.util as u; print(u.find_spec('pytest') and u.find_spec('pytest').origin)"
    assert "AGENT-CODE" not in python(grader(fresh, fresh), "import pytest", tmp_path)
    assert str(tmp_path / "pytest.py") not in python(grader(fresh, fresh), code, tmp_path)
    assert str(tmp_path / "pytest.py") in python(grader(fresh, fresh, ("PYTHONSAFEPATH",)), code, tmp_path)


def test_pytest_loads_plugins_only_through_the_guard(setup):  # noqa: F811
    """PYTEST_DISABLE_PLUGIN_AUTOLOAD with PYTEST_PLUGINS=guard: the agent's entry-point plugin (listed
    as changed) is left out; with pytest's autoload back, the same plugin forges a pass."""
    root = setup
    (root / "lib" / "horizon_pytest_guard.changed").write_text(f"{root}/site/evilplug.py\n")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(root / "tests")]

    def run(env):
        env["PYTHONPATH"] = f"{root / 'lib'}:{root / 'site'}"  # the toolchain's lib, then a site directory
        return subprocess.run(argv, env=env, cwd=root, capture_output=True, text=True, timeout=120)

    assert run(grader(root, root)).returncode == 1  # the failing test fails
    forged = run(grader(root, root, ("PYTEST_DISABLE_PLUGIN_AUTOLOAD",)))
    assert forged.returncode == 0, forged.stdout + forged.stderr


def test_nothing_of_the_harnesss_environment_reaches_the_grader(tmp_path, monkeypatch):
    monkeypatch.setenv("HORIZON_PROBE_SECRET", "s3cret-4f1")
    out = python(grader(tmp_path, tmp_path), "import os; print(sorted(os.environ.items()))", tmp_path)
    assert "s3cret-4f1" not in out and "HOME" in out


# -- the reward as read from the sandbox, and what goes into /tests -----------------------------------


class Files:
    """read_first as a sandbox answers it: the first of the paths asked that it holds."""

    def __init__(self, files: dict, error: str = ""):
        self.files, self.error, self.asked = files, error, []

    def read_first(self, paths, cap):
        self.asked.append((paths, cap))
        if self.error:
            return None, None, self.error
        for p in paths:
            if p in self.files:
                return p, self.files[p], ""
        return None, None, ""


V = "/logs/verifier/"


@pytest.mark.parametrize(
    "files, error, expected",
    [
        ({V + "reward.txt": b"1\n", V + "reward.json": b'{"reward": 0.5}'}, "", (0.5, "reward.json", None)),
        ({V + "reward.txt": b"1\n"}, "", (1.0, "reward.txt", None)),
        (
            {},
            "tar: permission denied",
            (None, None, "the reward files could not be read (tar: permission denied)"),
        ),
        ({}, "", (None, None, "no reward file (/logs/verifier/reward.json or reward.txt)")),
        (
            {V + "reward.txt": None},
            "",
            (None, "reward.txt", "reward.txt: could not be read (not a regular file)"),
        ),
        (
            {V + "reward.json": b" " * (64 << 10) + b"1"},
            "",
            (None, "reward.json", "reward.json: larger than 64 KiB"),
        ),
        (
            {V + "reward.txt": b"1" + b" " * ((64 << 10) - 1)},
            "",
            (1.0, "reward.txt", None),
        ),  # at the cap: read
        ({V + "reward.txt": b"1\xff"}, "", (None, "reward.txt", "reward.txt: '1\ufffd' is not a number")),
    ],
    ids=["json-first", "txt", "unreadable", "none", "not-a-file", "over-cap", "at-cap", "not-utf8"],
)
def test_the_reward_file_as_the_sandbox_holds_it(files, error, expected):
    from horizon.eval.grading.grader import REWARD_CAP, read_reward

    sb = Files(files, error)
    r = read_reward(sb)
    assert (r.value, r.file, r.error) == expected
    assert sb.asked == [([V + "reward.json", V + "reward.txt"], REWARD_CAP)] and REWARD_CAP == 64 << 10


def test_the_tests_archive_holds_the_tasks_tests_owned_by_root():
    import io
    import tarfile

    from horizon.eval.grading.grader import tests_archive

    for task, names in (
        (load_tb1(HELLO_TB1), ["run-tests.sh", "test_outputs.py"]),
        (load_harbor(HELLO), ["test.sh", "test_outputs.py"]),
    ):
        with tarfile.open(fileobj=io.BytesIO(tests_archive(task))) as tar:
            members = tar.getmembers()
        assert [m.name for m in members] == names
        assert all((m.uid, m.gid, m.uname, m.gname) == (0, 0, "root", "root") for m in members)
        assert [bool(m.mode & 0o100) for m in members] == [n.endswith(".sh") for n in names]


class Recording(ForgingSandbox):
    """Records what grade() hands the sandbox; exec answers `out` (rc, stdout, timed out) for the tests."""

    def __init__(self, out=(0, PASSED, False), reward=(V + "reward.txt", b"1\n", "")):
        super().__init__(None)
        self.out, self.reward, self.kwargs, self.archives = out, reward, [], []

    def reset_for_grading(self, archive):
        self.archives.append(archive)
        return super().reset_for_grading(archive)

    def image_env(self):
        return {"FROM_IMAGE": "1", "PATH": "/usr/bin:/bin"}

    def exec(self, argv, **kw):
        self.calls.append("exec")
        self.argvs.append(argv)
        self.kwargs.append(kw)
        rc, text, timed_out = self.out
        return ExecResult(rc, text, "the stderr", timed_out)

    def read_first(self, paths, cap):
        return self.reward


def test_grade_hands_the_sandbox_the_tests_their_environment_and_limits():
    from horizon.eval.grading.grader import OUTPUT_CAP, RUN_SCRIPT, tests_archive

    task = load_harbor(HELLO)
    sb = Recording()
    g = grade(task, sb)
    assert sb.archives == [tests_archive(task)]
    assert sb.argvs == [["sh", "-c", RUN_SCRIPT, "/tests/test.sh"]] and sb.calls.count("kill_agent") == 2
    kw = sb.kwargs[0]
    assert (kw["timeout"], kw["cwd"], kw["max_bytes"]) == (task.test_timeout, "/app", OUTPUT_CAP)
    env = kw["env"]
    assert env["HOME"] == "/opt/horizon/home" and env["FROM_IMAGE"] == "1" and env["PIP_NO_INDEX"] == "1"
    assert env["PATH"] == "/opt/horizon/bin:/usr/bin:/bin" and "HORIZON_NETWORK" not in env
    assert (g.success, g.reward, g.timed_out, g.failure_mode, g.evidence) == (True, 1.0, False, None, None)
    assert g.detail == {"rc": 0, "reward_found": True, "reward_file": "reward.txt"} and g.rewards == {
        "reward": 1.0
    }
    assert g.output == PASSED + "\nthe stderr"
    sb = Recording()
    grade(task, sb, timeout=5, network=True)
    assert sb.kwargs[0]["timeout"] == 5 and sb.kwargs[0]["env"]["HORIZON_NETWORK"] == "1"
    assert "PIP_NO_INDEX" not in sb.kwargs[0]["env"]


@pytest.mark.parametrize(
    "out, reward, expected",
    [
        ((1, "", False), (V + "reward.txt", b"0.5\n", ""), (False, 0.5, False, None, None)),
        ((0, "", True), (V + "reward.txt", b"1\n", ""), (False, 1.0, True, None, None)),  # in time only
        ((0, "", False), (V + "reward.txt", b"x\n", ""), (False, 0.0, False, "reward_invalid", "reward.txt: 'x' is not a number")),
        ((0, "", False), (None, None, ""), (False, 0.0, False, None, "no reward file (/logs/verifier/reward.json or reward.txt)")),
        ((0, "", False), (V + "reward.json", b'{"a": 1, "b": 1}', ""),
         (False, 0.0, False, None, "reward.json: several rewards, none named reward: ['a', 'b']")),
    ],
    ids=["half", "timed-out", "invalid", "missing", "no-reward-key"],
)  # fmt: skip
def test_harbor_verdicts_by_the_reward(out, reward, expected):
    g = grade(load_harbor(HELLO), Recording(out, reward))
    assert (g.success, g.reward, g.timed_out, g.failure_mode, g.evidence) == expected
    assert g.detail["rc"] == out[0] and g.detail["reward_found"] == (g.evidence is None)


def test_tb1_verdicts_by_the_parser():
    summary = (
        "=== short test summary info ===\nPASSED t.py::a\nFAILED t.py::b\nPASSED t.py::c\n=== 1 failed ===\n"
    )
    g = grade(load_tb1(HELLO_TB1), Recording((1, summary, False)))
    assert (g.success, g.reward, g.failure_mode, g.evidence) == (False, 2 / 3, None, None)
    assert g.detail == {"tests": {"a": "PASSED", "b": "FAILED", "c": "PASSED"}, "rc": 1,
                        "parser": "pytest"}  # fmt: skip
    g = grade(load_tb1(HELLO_TB1), Recording((0, PASSED, True)))
    assert (g.success, g.reward, g.timed_out) == (False, 1.0, True)
    g = grade(load_tb1(HELLO_TB1), Recording((0, "no summary here", False)))
    assert (g.success, g.reward) == (False, 0.0) and g.evidence.startswith(
        "pytest parser: no 'short test summary"
    )
    assert g.detail["parse_error"] == g.evidence.removeprefix("pytest parser: ")
    g = grade(load_tb1(HELLO_TB1), Recording((0, "=== short test summary info ===\n", False)))
    assert (g.success, g.reward) == (True, 1.0)  # a header without results is resolved


def test_verifier_variables_take_the_harness_environment_as_harbor_does(monkeypatch):
    from dataclasses import replace

    from horizon.eval.grading.grader import verifier_env

    monkeypatch.setenv("HZ_SET", "from-harness")
    monkeypatch.delenv("HZ_UNSET", raising=False)
    task = replace(load_harbor(HELLO), verifier_env={
        "A": "${HZ_SET}", "B": "${HZ_UNSET:-fallback}", "C": "x-${HZ_UNSET}-y", "D": "${HZ_SET:-unused}", "E": "plain",
    })  # fmt: skip
    assert verifier_env(task) == {
        "A": "from-harness",
        "B": "fallback",
        "C": "x--y",
        "D": "from-harness",
        "E": "plain",
    }


def test_a_steps_own_tests_go_over_the_shared_ones():
    import io
    import tarfile

    from horizon.eval.grading.grader import tests_archive

    task = load_harbor(FIXTURES / "harbor-tasks" / "two-steps")
    for step in task.steps:
        with tarfile.open(fileobj=io.BytesIO(tests_archive(task, step))) as tar:
            files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
        own = Path(step.tests) / "test.sh"
        assert set(files) >= {"test.sh"} and files["test.sh"] == own.read_bytes(), step.name


def test_the_agent_shells_tests_wait_under_the_tests_timeout():
    from horizon.eval.grading.grader import OUTPUT_CAP

    sb = Recording((0, PASSED, False))
    grade(load_tb1(SAME_SHELL), sb, timeout=7, agent_shell=True)
    assert [k.get("timeout") for k in sb.kwargs[:3]] == [20, 7, 30]
    assert sb.kwargs[2]["cwd"] == "/" and sb.kwargs[2]["max_bytes"] == OUTPUT_CAP
    late = Recording((0, PASSED, True))  # the wait for the tests timed out
    g = grade(load_tb1(SAME_SHELL), late, timeout=7, agent_shell=True)
    assert g.timed_out and not g.success and g.detail["rc"] == 0


def test_grade_details_that_the_records_keep():
    from dataclasses import replace

    from horizon.eval.grading.grader import SETTLE_S, tests_archive

    sb = ForgingSandbox(FINDINGS[0])
    g = grade(load_harbor(HELLO), sb)
    assert g.timed_out is False and g.output == "" and g.rewards == {}
    settled = []
    sb = Recording((0, "out", False))
    sb.settle = settled.append
    sb.exec = lambda argv, **kw: (sb.kwargs.append(kw), ExecResult(0, "x" * 30000, "", False))[1]
    task = replace(load_harbor(HELLO), verifier_env={"HZ_V": "1"})
    g = grade(task, sb)
    assert settled == [SETTLE_S] and g.output == "x" * 20000 and sb.kwargs[0]["env"]["HZ_V"] == "1"
    steps = load_harbor(FIXTURES / "harbor-tasks" / "two-steps")
    step = next(s for s in steps.steps if s.name == "append")
    sb = Recording()
    grade(steps, sb, step=replace(step, test_timeout=11))
    assert sb.archives == [tests_archive(steps, step)] and sb.kwargs[0]["timeout"] == 11
    sb = Recording()
    grade(load_tb1(SAME_SHELL), sb)  # eval.same_shell_tests is off unless asked for
    assert sb.calls[1] == "kill_agent" and sb.argvs[0][0] == "sh"
    half = "=== short test summary info ===\nPASSED t.py::a\nFAILED t.py::b\n"
    assert grade(load_tb1(HELLO_TB1), Recording((1, half, False))).reward == 0.5
    g = grade(load_harbor(HELLO), Recording(reward=(V + "reward.txt", b"0.9999999990\n", "")))
    assert g.success  # within 1e-9 of 1
    g = grade(load_harbor(HELLO), Recording(reward=(V + "reward.txt", b"x\n", "")))
    assert g.detail["reward_error"] == "reward.txt: 'x' is not a number"
    g = grade(load_tb1(SAME_SHELL), Recording((0, PASSED, False)), agent_shell=True)
    assert g.timed_out is False and g.success


def test_the_agent_shells_failed_wait_is_the_tests_status():
    class FailedWait(Recording):
        def exec(self, argv, **kw):
            if argv[:2] == ["tmux", "wait-for"]:
                return ExecResult(3, "", "", False)
            return super().exec(argv, **kw)

    g = grade(load_tb1(SAME_SHELL), FailedWait(), agent_shell=True)
    assert g.detail["rc"] == 3

    class LateWait(Recording):  # only the wait for the tests runs out of time
        def exec(self, argv, **kw):
            if argv[:2] == ["tmux", "wait-for"]:
                return ExecResult(124, "", "", True)
            return super().exec(argv, **kw)

    g = grade(load_tb1(SAME_SHELL), LateWait(), agent_shell=True)
    assert g.timed_out and not g.success


def test_scripts_in_the_archive_are_executable_and_root_owned_whatever_their_files(tmp_path):
    import io
    import os
    import shutil
    import tarfile

    from horizon.eval.grading.grader import tests_archive

    d = tmp_path / "task"
    shutil.copytree(HELLO, d)
    for p in (d / "tests").iterdir():
        p.chmod(0o640)
        if os.geteuid() == 0:  # another owner, as an unpacked task's files have
            os.chown(p, 4321, 4321)
    with tarfile.open(fileobj=io.BytesIO(tests_archive(load_harbor(d)))) as tar:
        modes = {m.name: (m.mode & 0o777, m.uid, m.uname) for m in tar.getmembers()}
    assert modes == {"test.sh": (0o755, 0, "root"), "test_outputs.py": (0o640, 0, "root")}
    (d / "tests" / "test.sh").chmod(0o660)  # as chmod +x: the script's own bits stay, the exec bits are added
    with tarfile.open(fileobj=io.BytesIO(tests_archive(load_harbor(d)))) as tar:
        assert tar.getmember("test.sh").mode & 0o777 == 0o775


def test_tests_that_cannot_be_read_are_a_sandbox_error_naming_the_task(monkeypatch):
    import tarfile

    from horizon.eval.grading.grader import tests_archive
    from horizon.eval.sandbox import SandboxError

    def unreadable(*a, **kw):  # as root no file mode forbids reading: the error is raised where tar reads
        raise PermissionError(13, "Permission denied", "test.sh")

    monkeypatch.setattr(tarfile.TarFile, "add", unreadable)
    task = load_harbor(HELLO)
    with pytest.raises(
        SandboxError, match=rf"^task {task.id}: reading its tests failed: .*Permission denied"
    ):
        tests_archive(task)
