"""Grading: the task's tests run in the attempt's sandbox after the agent, as a clean grader.

Every backend, through the sandbox protocol, in this order:
0. settle: up to SETTLE_S for the sandbox to go quiet (no process running or in disk wait, twice in a
   row), so that what the agent typed last (on a loaded machine, perhaps not read by its shell yet)
   finishes as it would have; a sandbox busy for longer is not waited for;
1. kill_agent: every process the agent left is killed, so nothing of it runs while the tests do;
2. reset_for_grading: a fresh /tests holding the task's tests (extracted inside the sandbox, never
   copied by the host into a directory the agent could write), a fresh /logs/verifier and a fresh
   HOME for the grader;
3. the test script runs with grader_env (that HOME, the toolchain first on PATH, no user site, no
   current directory on Python's path), cwd /app, under the task's test timeout;
4. kill_agent again: nothing the tests started (or the agent's code they ran) outlives them;
5. the verdict. Terminal-Bench v1: pytest's `-rA` summary (at least one PASSED, no FAILED or
   ERROR). Harbor: the reward, read from inside the sandbox (capped), from reward.json first, then
   reward.txt, as Harbor reads them, and parsed strictly: reward.txt holds one number;
   reward.json is an object whose "reward" is a number. Anything else is `reward_invalid`, named
   in the grade's detail; no reward file is a failure with the reason recorded.
A SandboxError from any step propagates: the attempt asks the sandbox's diagnose() whose doing it was.
"""

from __future__ import annotations

import io
import json
import math
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path

from horizon.eval.sandbox import Sandbox, SandboxError
from horizon.eval.sandbox.toolchain import grader_env
from horizon.eval.tasks import Task

REWARD_CAP = 64 << 10
SETTLE_S = 3.0
# the first of the files given that exists: its path on a line, then at most REWARD_CAP + 1 bytes of it;
# rc 3: none exists; rc 4: it is not a regular file (a FIFO would block the reader)
READ = (
    'for f in "$@"; do if [ -e "$f" ] || [ -L "$f" ]; then echo "$f"; [ -f "$f" ] || exit 4; '
    f'exec head -c {REWARD_CAP + 1} -- "$f"; fi; done; exit 3'
)


@dataclass
class Grade:
    success: bool
    reward: float
    timed_out: bool
    detail: dict
    output: str
    failure_mode: str | None = None  # set when grading itself names why it failed (reward_invalid, ...)
    evidence: str | None = None


@dataclass(frozen=True)
class Reward:
    value: float | None
    file: str | None  # reward.json | reward.txt | None (neither exists)
    error: str | None  # why there is no valid reward, naming the file


_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\s+(\S+)", re.M)


def parse_pytest_summary(text: str) -> dict[str, str]:
    """test id -> outcome, from pytest's `-rA` short test summary (also 'test_x PASSED' lines)."""
    out: dict[str, str] = {}
    section = text.split("short test summary info", 1)[-1] if "short test summary info" in text else text
    for m in _SUMMARY.finditer(section):
        out[m.group(2)] = m.group(1)
    if not out:
        for m in re.finditer(r"^(\S+::\S+)\s+(PASSED|FAILED|ERROR)", text, re.M):
            out[m.group(1)] = m.group(2)
    return out


def parse_reward(name: str, text: str) -> Reward:
    """A reward file's content, strictly: reward.txt one number, reward.json {"reward": number, ...}."""
    if name == "reward.txt":
        try:
            value = float(text.strip())
        except ValueError:
            return Reward(None, name, f"reward.txt: {text.strip()[:80]!r} is not a number")
    else:
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            return Reward(None, name, f"reward.json: not valid JSON ({e.msg}, line {e.lineno})")
        if not isinstance(obj, dict) or "reward" not in obj:
            return Reward(
                None, name, f'reward.json: expected an object with a "reward" key, got {text.strip()[:80]!r}'
            )
        value = obj["reward"]
        if isinstance(value, bool) or not isinstance(value, int | float):
            return Reward(None, name, f'reward.json: "reward" is {value!r}, not a number')
        value = float(value)
    if not math.isfinite(value):
        return Reward(None, name, f"{name}: {value} is not a finite number")
    return Reward(value, name, None)


def read_reward(sandbox: Sandbox) -> Reward:
    """reward.json, else reward.txt, read inside the sandbox in one call (each at most REWARD_CAP)."""
    r = sandbox.exec(["sh", "-c", READ, "sh", "/logs/verifier/reward.json", "/logs/verifier/reward.txt"],
                     timeout=30, cwd="/", max_bytes=REWARD_CAP + 200)  # fmt: skip
    if r.timed_out or r.rc not in (0, 3, 4):
        return Reward(None, None, f"the reward files could not be read ({r.rc}: {r.stderr.strip()[-200:]})")
    if r.rc == 3:
        return Reward(None, None, "no reward file (/logs/verifier/reward.json or reward.txt)")
    path, _, content = r.stdout.partition("\n")
    name = path.rsplit("/", 1)[-1]
    if r.rc == 4:
        return Reward(None, name, f"{name}: could not be read (not a regular file)")
    if len(content.encode()) > REWARD_CAP:
        return Reward(None, name, f"{name}: larger than {REWARD_CAP >> 10} KiB")
    return parse_reward(name, content)


def tests_archive(task: Task) -> bytes:
    """What goes into /tests, as a tar archive owned by root (tb1: run-tests.sh and tests/; harbor: tests/)."""
    root = Path(task.path)
    entries = [(root / "run-tests.sh", "run-tests.sh")] if task.format == "tb1" else []
    if (root / "tests").is_dir():
        entries += [(p, p.name) for p in sorted((root / "tests").iterdir())]

    def owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    buf = io.BytesIO()
    try:
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for path, name in entries:
                tar.add(str(path), arcname=name, filter=owned_by_root)
    except OSError as e:
        raise SandboxError(f"task {task.id}: reading its tests failed: {e}") from None
    return buf.getvalue()


def grade(task: Task, sandbox: Sandbox, timeout: float | None = None) -> Grade:
    timeout = timeout or task.test_timeout
    archive = tests_archive(task)
    sandbox.settle(SETTLE_S)
    sandbox.kill_agent()
    env = grader_env(sandbox.reset_for_grading(archive))
    script = "/tests/run-tests.sh" if task.format == "tb1" else "/tests/test.sh"
    r = sandbox.exec(["bash", script], timeout=timeout, env=env, cwd="/app", max_bytes=256 << 10)
    sandbox.kill_agent()
    text = (r.stdout + "\n" + r.stderr)[-20000:]
    if task.format == "tb1":
        results = parse_pytest_summary(r.stdout)
        passed = sum(1 for v in results.values() if v in ("PASSED", "XFAIL"))
        bad = sum(1 for v in results.values() if v in ("FAILED", "ERROR"))
        ok = passed > 0 and bad == 0 and not r.timed_out
        reward = passed / (passed + bad) if (passed + bad) else 0.0
        return Grade(ok, reward, r.timed_out, {"tests": results, "rc": r.rc}, text)
    rw = read_reward(sandbox)
    ok = rw.value is not None and rw.value >= 1.0 - 1e-9 and not r.timed_out
    detail = {"rc": r.rc, "reward_found": rw.value is not None, "reward_file": rw.file}
    if rw.error:
        detail["reward_error"] = rw.error
    failure = "reward_invalid" if rw.error and rw.file else None
    return Grade(ok, float(rw.value or 0.0), r.timed_out, detail, text, failure, rw.error)
