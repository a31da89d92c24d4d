"""Grading: the task's tests run in the attempt's sandbox after the agent, as a clean grader.

Every backend, through the sandbox protocol, in this order:
0. settle: up to SETTLE_S for the sandbox to go quiet (no process running or in disk wait, twice in a
   row), so that what the agent typed last (on a loaded machine, perhaps not read by its shell yet)
   finishes as it would have; a sandbox busy for longer is not waited for;
1. kill_agent: every process the agent left is killed, so nothing of it runs while the tests do;
1b. audit: what the agent changed in the sandbox that decides a grade (its shell, python, start-up
   hooks, pytest's configuration: sandbox/integrity.py), read from outside the sandbox: tampered, or
   its storage outgrown: sandbox_exhausted; either way the tests do not run;
2. reset_for_grading: a fresh /tests holding the task's tests (extracted inside the sandbox, never
   copied by the host into a directory the agent could write), a fresh /logs/verifier and a fresh
   HOME for the grader;
3. the test script runs with grader_env (the image's environment and the task's verifier variables,
   then that HOME, the toolchain first on PATH, pip and uv offline unless the task has the network,
   no user site, no current directory on Python's path), in the task's working directory, under the
   task's test timeout, stdout and stderr as one stream (as a terminal or Harbor's log file shows it);
4. kill_agent again: nothing the tests started (or the agent's code they ran) outlives them;
5. the verdict, as the owning harness reaches it (horizon.eval.grading.verdict): Terminal-Bench v1 by the
   task's parser (pytest or swebench) over the output; Harbor by the reward (capped; docker reads it
   through the daemon, local and apptainer inside the sandbox), reward.json first, then reward.txt. A grader that leaves neither a reward
   file nor a parsable summary is a failure whose reason (and the output's tail) is recorded.
A SandboxError from any step propagates: the attempt asks the sandbox's diagnose() whose doing it was.
"""

from __future__ import annotations

import io
import os
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from horizon.eval.grading.verdict import Reward, parse_reward, tb1_verdict
from horizon.eval.sandbox import ExecResult, Sandbox, SandboxError
from horizon.eval.sandbox.toolchain import GUARD, grader_env
from horizon.eval.tasks.benchmark import Step, Task

__all__ = ["Grade", "Reward", "grade", "parse_reward", "read_reward", "tests_archive"]

REWARD_CAP = 64 << 10
OUTPUT_CAP = 256 << 10
SETTLE_S = 3.0
# the test script with its output and errors as one stream; `bash` unless its shebang names another program
RUN_SCRIPT = 'case "$(head -c 64 "$0")" in "#!"*sh*) exec bash "$0" 2>&1;; "#!"*) exec "$0" 2>&1;; esac; exec bash "$0" 2>&1'
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass
class Grade:
    success: bool
    reward: float
    timed_out: bool
    detail: dict
    output: str
    failure_mode: str | None = None  # set when grading itself names why it failed (reward_invalid, ...)
    evidence: str | None = None
    rewards: dict = field(default_factory=dict)  # a Harbor grader's whole reward file


def read_reward(sandbox: Sandbox) -> Reward:
    """reward.json, else reward.txt (each at most REWARD_CAP), as the sandbox reads it after the tests
    (docker: through the daemon, from the stopped container)."""
    path, data, error = sandbox.read_first(
        ["/logs/verifier/reward.json", "/logs/verifier/reward.txt"], REWARD_CAP
    )
    if error:
        return Reward(None, None, f"the reward files could not be read ({error})")
    if path is None:
        return Reward(None, None, "no reward file (/logs/verifier/reward.json or reward.txt)")
    name = path.rsplit("/", 1)[-1]
    if data is None:
        return Reward(None, name, f"{name}: could not be read (not a regular file)")
    if len(data) > REWARD_CAP:
        return Reward(None, name, f"{name}: larger than {REWARD_CAP >> 10} KiB")
    return parse_reward(name, data.decode("utf-8", "replace"))


def _test_files(task: Task, step: Step | None) -> list[tuple[Path, str]]:
    """(host path, name in /tests): tb1 run-tests.sh and tests/; harbor tests/ (a step's own over the shared)."""
    root = Path(task.path)
    entries = [(root / "run-tests.sh", "run-tests.sh")] if task.format == "tb1" else []
    dirs = [root / "tests"]
    if step is not None and Path(step.tests) != root / "tests":
        dirs.append(Path(step.tests))
    names = {}
    for d in dirs:
        if d.is_dir():
            names.update({p.name: p for p in sorted(d.iterdir())})
    return entries + [(p, n) for n, p in names.items()]


def tests_archive(task: Task, step: Step | None = None) -> bytes:
    """What goes into /tests, as a tar archive owned by root."""

    def owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        if info.isfile() and info.name.endswith(".sh"):
            info.mode |= 0o755  # Harbor makes the script executable before running it
        return info

    buf = io.BytesIO()
    try:
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for path, name in _test_files(task, step):
                tar.add(str(path), arcname=name, filter=owned_by_root)
    except OSError as e:
        raise SandboxError(f"task {task.id}: reading its tests failed: {e}") from None
    return buf.getvalue()


def verifier_env(task: Task) -> dict[str, str]:
    """[verifier].env with `${VAR}` / `${VAR:-default}` taken from the harness's environment, as Harbor does."""
    return {
        k: _ENV_REF.sub(lambda m: os.environ.get(m.group(1)) or (m.group(2) or ""), v)
        for k, v in task.verifier_env.items()
    }


# eval.same_shell_tests = agent: typed into the agent's own shell as terminal-bench does (toolchain on its PATH)
IN_AGENT_SHELL = (
    "export PATH=/opt/horizon/bin:$PATH TEST_DIR=/tests PIP_NO_INDEX=1 PIP_FIND_LINKS=/opt/horizon/wheels "
    'PYTHONPATH="/opt/horizon/lib${PYTHONPATH:+:$PYTHONPATH}" PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 '
    f"PYTEST_PLUGINS={GUARD}; "
    "bash /tests/run-tests.sh > /logs/verifier/tests.out 2>&1; tmux wait-for -S horizon-tests"
)


def _in_agent_shell(sandbox: Sandbox, timeout: float) -> ExecResult | None:
    """The tests typed into the agent's tmux session (its cwd, its variables, what it left running);
    None when that session is gone (the caller grades in a fresh shell instead)."""
    from horizon.eval.agent.terminal import SESSION

    sent = sandbox.exec(["tmux", "send-keys", "-t", SESSION, IN_AGENT_SHELL, "Enter"], timeout=20)
    if not sent.ok:
        return None
    waited = sandbox.exec(["tmux", "wait-for", "horizon-tests"], timeout=timeout)
    out = sandbox.exec(
        ["sh", "-c", "cat /logs/verifier/tests.out"], timeout=30, cwd="/", max_bytes=OUTPUT_CAP
    )
    return ExecResult(0 if waited.ok else waited.rc, out.stdout, out.stderr, waited.timed_out)


def grade(
    task: Task,
    sandbox: Sandbox,
    timeout: float | None = None,
    step: Step | None = None,
    network: bool = False,
    agent_shell: bool = False,
) -> Grade:
    """`agent_shell` (eval.same_shell_tests = agent): a TB1 task with run_tests_in_same_shell runs its
    tests in the agent's shell, as its owner does; the agent is not killed first (so it can interfere)."""
    timeout = timeout or (step.test_timeout if step else task.test_timeout)
    archive = tests_archive(task, step)
    sandbox.settle(SETTLE_S)
    in_shell = agent_shell and task.format == "tb1" and task.same_shell
    if not in_shell:
        sandbox.kill_agent()
    finding = sandbox.audit()
    if finding is not None:  # the agent changed what grades it, or outgrew its storage: no tests
        detail = {"audit": finding.failure_mode}
        return Grade(False, 0.0, False, detail, "", finding.failure_mode, finding.evidence)
    home = sandbox.reset_for_grading(archive)
    env = grader_env(home, sandbox.image_env(), verifier_env(task), network)
    script = "/tests/run-tests.sh" if task.format == "tb1" else "/tests/test.sh"
    r = _in_agent_shell(sandbox, timeout) if in_shell else None
    if r is None:
        if in_shell:
            sandbox.kill_agent()
        r = sandbox.exec(
            ["sh", "-c", RUN_SCRIPT, script],
            timeout=timeout,
            env=env,
            cwd=sandbox.workdir,
            max_bytes=OUTPUT_CAP,
        )
    sandbox.kill_agent()
    text = (r.stdout + ("\n" + r.stderr if r.stderr else ""))[-20000:]
    if task.format == "tb1":
        v = tb1_verdict(task.parser, r.stdout + r.stderr)
        ok = v.resolved and not r.timed_out
        reward = v.passed / (v.passed + v.failed) if v.passed + v.failed else float(ok)
        detail = {"tests": v.results, "rc": r.rc, "parser": task.parser}
        if v.error:
            detail["parse_error"] = v.error
        return Grade(
            ok, reward, r.timed_out, detail, text, None, v.error and f"{task.parser} parser: {v.error}"
        )
    rw = read_reward(sandbox)
    ok = rw.value is not None and rw.value >= 1.0 - 1e-9 and not r.timed_out
    detail = {"rc": r.rc, "reward_found": rw.value is not None, "reward_file": rw.file}
    if rw.error:
        detail["reward_error"] = rw.error
    elif rw.value is None and rw.rewards is not None:
        detail["reward_error"] = f"{rw.file}: several rewards, none named reward: {sorted(rw.rewards)}"
    failure = "reward_invalid" if rw.error and rw.file else None
    return Grade(
        ok,
        float(rw.value or 0.0),
        r.timed_out,
        detail,
        text,
        failure,
        rw.error or detail.get("reward_error"),
        dict(rw.rewards or {}),
    )
