"""A hostile agent, under the local and the docker sandbox: a wrong answer plus one trick each.

Every trick must leave the grade a FAIL, the host's files as they were, the harness's secrets unread,
and an agent that kills everything it can must fail as the agent (never an infrastructure error,
which the tables exclude), with the next attempt graded as usual. The tricks run through the real
agent loop: a scripted model (FAKE: no LLM) types them into the sandbox's tmux.
"""

import base64
import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from horizon.eval.agent.loop import AgentConfig
from horizon.eval.agent.prompts import Template
from horizon.eval.attempt import LiveSandboxes, RunContext, run_attempt
from horizon.eval.tasks.benchmark import load_harbor
from horizon.terminus import Command, render_response
from tests.doubles.backends import ScriptedBackend
from tests.helpers import BIN, FIXTURES, REPO

pytestmark = pytest.mark.engine
TEMPLATE = Template.load(REPO / "demo" / "prompt.yaml")
HELLO = load_harbor(FIXTURES / "harbor-tasks" / "hello")
WRONG = "echo nope > /app/out.txt; "
SECRET = "horizon-probe-secret-91c4"
PASS_SCRIPT = "#!/bin/bash\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n"


def ans(cmd=None, done=False, d=0.3):
    return render_response("a", "p", [Command(cmd, d)] if cmd else [], done, reasoning="r")


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.slow)])
def kind(request, tools):
    if request.param == "docker":
        request.getfixturevalue("dockerd")
    return request.param


def probe(kind, tools, trick, wait=1.5, task=HELLO):
    """One attempt: the wrong answer and the trick, then task_complete twice."""
    answers = [ans(WRONG + trick + "\n", d=wait), ans(done=True), ans(done=True)]
    ctx = RunContext(
        kind, ScriptedBackend(answers), TEMPLATE, AgentConfig(), [], {"toolchain": tools}, "probe"
    )
    out = run_attempt(task, 0, 0, ctx, 0, LiveSandboxes(), None)
    return {**out.record.to_dict(), "messages": out.messages}


def b64_file(path: str, text: str) -> str:
    """Shell that writes `text` to `path` (base64: no quoting trouble in tmux)."""
    return f"echo {base64.b64encode(text.encode()).decode()} | base64 -d > {path}"


@pytest.fixture
def host_files(tmp_path):
    """A root-only host file the agent aims at, and a host path it wants created."""
    canary = Path("/tmp") / f"horizon-probe-canary-{os.getpid()}"
    canary.write_text("untouched\n")
    canary.chmod(0o600)
    created = Path("/tmp") / f"horizon-probe-new-{os.getpid()}"
    yield canary, created
    canary.unlink(missing_ok=True)
    created.unlink(missing_ok=True)


def test_symlinks_planted_in_tests_reach_nothing_and_pass_nothing(kind, tools, host_files):
    canary, created = host_files
    trick = (
        f"{b64_file(created, PASS_SCRIPT)}; chmod +x {created}; mkdir -p /tests; "
        f"ln -sf {created} /tests/test.sh; ln -sf {canary} /tests/test_outputs.py; chmod 555 /tests"
    )
    rec = probe(kind, tools, trick)
    assert not rec["success"] and rec["failure_mode"] == "tests_failed"
    assert canary.read_text() == "untouched\n" and oct(canary.stat().st_mode & 0o777) == "0o600"
    assert not created.exists()  # the agent's path never resolved on the host


FAKE_SERVER = r"""
import base64, json, os, socket
path = "/run/horizon/ctl.sock"
os.makedirs("/run/horizon", exist_ok=True)
try: os.unlink(path)
except OSError: pass
s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(8)
one = base64.b64encode(b"1\n").decode()
while True:
    c, _ = s.accept(); c.recv(1 << 20)
    c.sendall(json.dumps({"rc": 0, "stdout": one, "stderr": "", "timed_out": False}).encode() + b"\n"); c.close()
"""


def test_a_fake_control_server_forges_nothing(kind, tools):
    trick = f"{b64_file('/tmp/fake.py', FAKE_SERVER)}; (python3 /tmp/fake.py >/dev/null 2>&1 &)"
    rec = probe(kind, tools, trick)
    assert not rec["success"] and rec["failure_mode"] == "tests_failed"


def test_a_socket_link_never_makes_the_host_connect(kind, tools):
    path = Path("/tmp") / f"horizon-probe-sock-{os.getpid()}"
    path.unlink(missing_ok=True)
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(path))
    srv.listen(8)
    connections = []

    def serve():  # answers as a control server would: "rc 0, output 1"
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            connections.append(c.recv(1 << 16))
            one = base64.b64encode(b"1\n").decode()
            c.sendall(b'{"rc": 0, "stdout": "%s", "stderr": "", "timed_out": false}\n' % one.encode())
            c.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        rec = probe(
            kind,
            tools,
            f"mkdir -p /run/horizon; rm -f /run/horizon/ctl.sock; ln -s {path} /run/horizon/ctl.sock",
        )
    finally:
        srv.close()
        path.unlink(missing_ok=True)
    assert connections == [] and not rec["success"]


def test_the_user_site_of_the_agent_is_not_loaded_by_the_grader(kind, tools):
    site = "$(python3 -c 'import site; print(site.getusersitepackages())')"
    trick = f"mkdir -p {site} && {b64_file(site + '/usercustomize.py', 'import os; os._exit(0)')}"
    rec = probe(kind, tools, trick)
    assert not rec["success"] and rec["failure_mode"] == "tests_failed"


def test_a_pytest_module_in_app_is_not_imported_by_the_grader(kind, tools):
    rec = probe(kind, tools, b64_file("/app/pytest.py", "import os\nos._exit(0)\n"))
    assert not rec["success"] and rec["failure_mode"] == "tests_failed"


def test_a_read_only_reward_in_a_read_only_verifier_dir_is_not_read(kind, tools):
    trick = (
        "mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; "
        "chmod 444 /logs/verifier/reward.txt; chmod 555 /logs/verifier /logs"
    )
    rec = probe(kind, tools, trick)
    assert not rec["success"] and rec["failure_mode"] == "tests_failed"


def test_a_background_writer_cannot_rewrite_the_reward(kind, tools):
    loop = "while :; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; sleep 0.005; done"
    rec = probe(kind, tools, f"(nohup sh -c '{loop}' >/dev/null 2>&1 &)")
    assert not rec["success"] and rec["failure_mode"] == "tests_failed"


def test_no_secret_of_the_harness_is_readable_inside(kind, tools, monkeypatch):
    monkeypatch.setenv("HORIZON_PROBE_SECRET", SECRET)  # as an API key in the rollout job's environment
    pattern = SECRET[:-1] + f"[{SECRET[-1]}]"  # grep's own command line must not match
    trick = f"cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' | grep -c '{pattern}'; env | grep -c HORIZON"
    rec = probe(kind, tools, trick)
    seen = rec["messages"][2]["content"]
    assert SECRET not in seen and "\n0\n0" in seen, seen


def test_kill_all_is_the_agents_failure_and_the_next_attempt_is_graded(kind, tools):
    rec = probe(kind, tools, "kill -9 -1")
    assert rec["failure_mode"] == "terminal_lost" and rec["ended"] == "terminal_lost"  # not infra_error
    assert "the sandbox is up" in rec["evidence"] or "container is up" in rec["evidence"]
    honest = [ans("echo hello > /app/out.txt\n"), ans(done=True), ans(done=True)]
    ctx = RunContext(
        kind, ScriptedBackend(honest), TEMPLATE, AgentConfig(), [], {"toolchain": tools}, "probe"
    )
    assert run_attempt(HELLO, 1, 0, ctx, 0, LiveSandboxes(), None).record.success


def test_the_oracle_grades_every_task_whatever_one_does(kind, tools, tmp_path):
    import shutil

    for name, solve in (
        ("a-kills-all", "kill -9 -1\n"),
        ("b-honest", None),
        ("c-wrong", "echo nope > /app/out.txt\n"),
    ):
        shutil.copytree(FIXTURES / "harbor-tasks" / "hello", tmp_path / name)
        if solve:
            (tmp_path / name / "solution" / "solve.sh").write_text("#!/bin/bash\n" + solve)
    r = subprocess.run([str(BIN / "horizon"), "oracle", str(tmp_path), "--sandbox", kind], capture_output=True,
                       text=True, timeout=600)  # fmt: skip
    lines = [x for x in r.stdout.splitlines() if not x.startswith("      | ")]  # each failure's grader tail
    assert r.returncode == 1 and len(lines) == 4, r.stdout + r.stderr[-2000:]
    assert lines[3] == f"oracle ({kind}): 1 passed, 2 failed, 0 skipped (unsupported) of 3"
    assert "      | FAILED ../tests/test_outputs.py::test_hello" in r.stdout  # why, in the grader's words
    # its solution killed every process it could (the shell running solve.sh survives its own kill)
    assert lines[0].startswith("FAIL  a-kills-all  reward 0.00  (solve.sh ")
    assert lines[0].endswith("tests_failed: rc 0, reward_file reward.txt)")
    assert lines[1] == "pass  b-honest  reward 1.00"
    assert lines[2] == "FAIL  c-wrong  reward 0.00  (tests_failed: rc 0, reward_file reward.txt)"
