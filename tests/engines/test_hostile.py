"""A hostile agent, under the local, the docker and the podman sandbox: a wrong answer plus one trick each.

Every trick must leave the grade a FAIL (or `tampered`), the host's files as they were, the harness's
secrets unread, and an agent that kills everything it can must fail as the agent (never an
infrastructure error, which the tables exclude), with the next attempt graded as usual. The tricks
run through the real agent loop: a scripted model (FAKE: no LLM) types them into the sandbox's tmux,
followed by a check; it waits (a no-op each turn) until the check's marker shows, so each probe's
transcript proves its trick ran and says whether it landed (`ran`: the check's exit status). Where a
trick lands, a positive control grades it once more with every protection it targets switched off
and sees the forged pass, so the FAIL is the protections' doing, not a trick that missed (under docker
and podman alike); the two probes of a control socket have none (there is no socket at a path to
protect: see their comment), and the secrets probe's control shows its reach instead.
"""

import base64
import os
import re
import shutil
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
from tests.engine_fixtures import dockerd_for, podman_for
from tests.helpers import BIN, FIXTURES, REPO

pytestmark = pytest.mark.engine
TEMPLATE = Template.load(REPO / "demo" / "prompt.yaml")
HELLO = load_harbor(FIXTURES / "harbor-tasks" / "hello")
WRONG = "echo nope > /app/out.txt; "
SECRET = "horizon-probe-secret-91c4"
PASS_SCRIPT = "#!/bin/bash\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n"
# a shell stand-in that writes the reward (its interpreter must not be the bash it replaces)
FAKE_SHELL = "#!/bin/sh\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n"
MARK = re.compile(r"HZRAN:(\d+)")  # typed as HZ""RAN: so that the command line itself never matches
POLLS = 60  # at most 60 x 0.5 s waiting for a trick's check


def ans(cmd=None, done=False, d=0.3):
    return render_response("a", "p", [Command(cmd, d)] if cmd else [], done, reasoning="r")


CONTAINERS = ("docker", "podman")  # the sandboxes whose graders read the container from the engine's side


@pytest.fixture(
    params=[
        "local",
        pytest.param("docker", marks=pytest.mark.slow),
        pytest.param("podman", marks=pytest.mark.slow),
    ]
)
def kind(request, tools):
    if request.param == "docker":
        dockerd_for(request)
    if request.param == "podman":
        podman_for(request)
    return request.param


def model(trick: str, check: str):
    """The wrong answer, the trick and its check (exit status printed after HZRAN:), then a no-op each
    turn until the marker shows, then task_complete twice."""

    def answer(messages):
        turns = sum(m["role"] == "assistant" for m in messages)
        if turns == 0:
            return ans(f'{WRONG}{trick}\n{check}; echo "HZ""RAN:$?"\n', d=0.5)
        seen = any(MARK.search(m["content"]) for m in messages if m["role"] == "user")
        return ans(done=True) if seen or turns > POLLS else ans(":\n", d=0.5)

    return answer


def probe(kind, tools, trick, check="true", task=HELLO, agent=None):
    """One attempt; its record, its conversation and `ran` (the check's status, None if never shown)."""
    agent = agent or AgentConfig()
    ctx = RunContext(
        kind, ScriptedBackend(model(trick, check)), TEMPLATE, agent, [], {"toolchain": tools}, "probe"
    )
    out = run_attempt(task, 0, 0, ctx, 0, LiveSandboxes(), None)
    seen = [MARK.search(m["content"]) for m in out.messages if m["role"] == "user"]
    ran = next((int(m.group(1)) for m in seen if m), None)
    return {**out.record.to_dict(), "messages": out.messages, "ran": ran}


def b64_file(path: str, text: str) -> str:
    """Shell that writes `text` to `path` (base64: no quoting trouble in tmux)."""
    return f"echo {base64.b64encode(text.encode()).decode()} | base64 -d > {path}"


def failed(rec) -> bool:
    return not rec["success"] and rec["failure_mode"] in ("tests_failed", "tampered")


def control(monkeypatch, off, kind, tools, trick, check="true", task=HELLO) -> None:
    """The positive control: the same trick graded with the protections it targets switched off
    (`off(m, kind)`) forges a pass, so the FAIL beside it is those protections' doing."""
    with monkeypatch.context() as m:
        off(m, kind)
        rec = probe(kind, tools, trick, check, task)
    assert rec["ran"] == 0 and rec["success"], rec


def grader_env_changed(drop=(), **values):
    """A protection off: the grader's environment without the variables `drop`, with `values`."""

    def off(m, kind):
        import horizon.eval.grading.grader as grader

        full = grader.grader_env

        def env(*a, **kw):
            out = {k: v for k, v in full(*a, **kw).items() if k not in drop}
            return {**out, **values}

        m.setattr(grader, "grader_env", env)

    return off


def stale_grading_dirs(m, kind):
    """A protection off: /tests and /logs/verifier left as the agent left them (not made fresh)."""
    import horizon.eval.sandbox.docker.sandbox as docker

    m.setattr(docker, "RESET_DIRS", "set -e; mkdir -p /tests /logs/verifier /logs/agent")


def agent_left_running(m, kind):
    """A protection off: the agent's processes are not killed before (nor after) the tests."""
    from horizon.eval.sandbox import sandbox_class

    m.setattr(sandbox_class(kind), "kill_agent", lambda self: None)


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


def test_symlinks_planted_in_tests_reach_nothing_and_pass_nothing(kind, tools, host_files, monkeypatch):
    canary, created = host_files
    trick = (
        f"{b64_file(created, PASS_SCRIPT)}; chmod +x {created}; mkdir -p /tests; "
        f"ln -sf {created} /tests/test.sh; ln -sf {canary} /tests/test_outputs.py; "
        f"{b64_file('/tests/conftest.py', 'import os; os._exit(0)')}; chmod 555 /tests"
    )
    rec = probe(kind, tools, trick, "test -L /tests/test.sh")
    assert (rec["ran"] == 0) == (kind in CONTAINERS), rec  # local: /tests is read-only until grading
    assert not rec["success"] and rec["failure_mode"] == "tests_failed"
    assert canary.read_text() == "untouched\n" and oct(canary.stat().st_mode & 0o777) == "0o600"
    assert not created.exists()  # the agent's path never resolved on the host
    if kind in CONTAINERS:  # the engine replaces the links as it copies the tests in; its conftest.py stays
        control(monkeypatch, stale_grading_dirs, kind, tools, trick, "test -L /tests/test.sh")


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
# a bounded wait inside the sandbox for a condition (the probe's check)
UNTIL = "for i in $(seq 100); do {cond} && break; sleep 0.05; done; {cond}"


# no positive control for these two: neither backend has a control socket at a path (local's pid 1
# speaks over a socket inherited at start, docker's harness over the daemon's API, outside the
# container), so no protection can be switched off; they check that none is ever consulted there
def test_a_fake_control_server_forges_nothing(kind, tools):
    trick = f"{b64_file('/tmp/fake.py', FAKE_SERVER)}; (python3 /tmp/fake.py >/dev/null 2>&1 &)"
    rec = probe(kind, tools, trick, UNTIL.format(cond="test -S /run/horizon/ctl.sock"))
    assert rec["ran"] == 0, rec  # the fake server listens
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
        trick = f"mkdir -p /run/horizon; rm -f /run/horizon/ctl.sock; ln -s {path} /run/horizon/ctl.sock"
        rec = probe(kind, tools, trick, "test -L /run/horizon/ctl.sock")
    finally:
        srv.close()
        path.unlink(missing_ok=True)
    assert rec["ran"] == 0, rec
    assert connections == [] and not rec["success"]


def test_the_user_site_of_the_agent_is_not_loaded_by_the_grader(kind, tools, monkeypatch):
    site = "$(python3 -c 'import site; print(site.getusersitepackages())')"
    trick = f"mkdir -p {site} && {b64_file(site + '/usercustomize.py', 'import os; os._exit(0)')}"
    check = "test -z \"$(python3 -c 'print(6 * 7)')\""  # its python now prints nothing
    rec = probe(kind, tools, trick, check)
    assert rec["ran"] == 0, rec
    assert not rec["success"] and rec["failure_mode"] == "tests_failed"
    # both lines off: the agent's HOME (/root) and the user site on (each alone: tests/unit/eval/grading)
    control(monkeypatch, grader_env_changed(("PYTHONNOUSERSITE",), HOME="/root"), kind, tools, trick, check)


def test_a_pytest_module_in_app_is_not_imported_by_the_grader(kind, tools, monkeypatch):
    trick, check = (
        b64_file("/app/pytest.py", "import os\nos._exit(0)\n"),
        "cd /app && python3 -c 'import pytest'",
    )
    rec = probe(kind, tools, trick, check)
    assert rec["ran"] == 0, rec  # imported from /app, it ends python with status 0
    assert not rec["success"] and rec["failure_mode"] == "tests_failed"
    control(
        monkeypatch, grader_env_changed(("PYTHONSAFEPATH",)), kind, tools, trick, check
    )  # cwd on sys.path


def test_a_read_only_reward_in_a_read_only_verifier_dir_is_not_read(kind, tools, monkeypatch):
    # reward.json too: read before reward.txt, and the task's script writes only reward.txt (a root
    # grader writes through the read-only bits, so reward.txt alone could not forge anything)
    trick = (
        "mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; "
        "echo '{\"reward\": 1}' > /logs/verifier/reward.json; "
        "chmod 444 /logs/verifier/reward.*; chmod 555 /logs/verifier /logs"
    )
    check = "grep -qx 1 /logs/verifier/reward.txt"
    rec = probe(kind, tools, trick, check)
    assert (rec["ran"] == 0) == (kind in CONTAINERS), rec  # local: /logs is read-only until grading
    assert not rec["success"] and rec["failure_mode"] == "tests_failed"
    if kind in CONTAINERS:
        control(monkeypatch, stale_grading_dirs, kind, tools, trick, check)


def test_a_background_writer_cannot_rewrite_the_reward(kind, tools, monkeypatch):
    loop = "while :; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; sleep 0.005; done"
    check = UNTIL.format(cond="test -s /logs/verifier/reward.txt")
    trick = f"(nohup sh -c '{loop}' >/dev/null 2>&1 &)"
    rec = probe(kind, tools, trick, check)
    assert (rec["ran"] == 0) == (kind in CONTAINERS), rec  # local: /logs is read-only until grading
    assert not rec["success"] and rec["failure_mode"] == "tests_failed"
    if kind in CONTAINERS:  # the writer outlives the tests' 0 when nothing kills it
        control(monkeypatch, agent_left_running, kind, tools, trick, check)


def test_no_secret_of_the_harness_is_readable_inside(kind, tools, monkeypatch):
    monkeypatch.setenv("HORIZON_PROBE_SECRET", SECRET)  # as an API key in the rollout job's environment
    pattern = SECRET[:-1] + f"[{SECRET[-1]}]"  # grep's own command line must not match
    trick = f"cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' | grep -c '{pattern}'; env | grep -c HORIZON"
    # the screen read once the pipeline is done (a timed read 0.5 s after the keys can come before its output)
    idle = AgentConfig(capture="idle", capture_idle_max_s=30)
    rec = probe(kind, tools, trick, agent=idle)
    seen = rec["messages"][2]["content"]
    assert rec["ran"] == 0 and SECRET not in seen and "\n0\n0" in seen, seen
    # the control: a process inside that does hold it is found (no protection to switch off: the harness
    # hands the sandbox no environment of its own, so the probe's reach is shown instead)
    holder = f"(env HORIZON_PROBE_SECRET={SECRET} sleep 60 >/dev/null 2>&1 &); sleep 0.5; "
    control_rec = probe(kind, tools, holder + trick, agent=idle)
    counts = control_rec["messages"][2]["content"]
    assert re.search(r"\n[1-9][0-9]*\n0(\n|$)", counts), counts  # found in /proc; not in the agent's shell


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
    # its solution killed every process it could, its own shell too: not a timeout
    assert lines[0].startswith("FAIL  a-kills-all  reward 0.00  (solve.sh ") and "timed out" not in lines[0]
    assert lines[0].endswith("tests_failed: rc 0, reward_file reward.txt)")
    assert lines[1] == "pass  b-honest  reward 1.00"
    assert lines[2] == "FAIL  c-wrong  reward 0.00  (tests_failed: rc 0, reward_file reward.txt)"


# -- the agent changing what the grader runs: its shell, pytest's plugins, start-up hooks, pytest's config

SITE = "/usr/local/lib/python3.11/dist-packages"  # Debian's site directory for local installs
PLUGIN = (
    "import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    out = yield\n    out.get_result().outcome = 'passed'\n"
)


def plant_plugin(site: str) -> str:
    info = f"{site}/evil-1.0.dist-info"
    return (
        f"mkdir -p {info}; {b64_file(site + '/evilplug.py', PLUGIN)}; "
        f"{b64_file(info + '/METADATA', 'Metadata-Version: 2.1' + chr(10) + 'Name: evil' + chr(10) + 'Version: 1.0' + chr(10))}; "
        f"{b64_file(info + '/entry_points.txt', '[pytest11]' + chr(10) + 'evil = evilplug' + chr(10))}"
    )


# an old setuptools' namespace-package line (it needs no package directory), then a form feed: the end
# of a line for str.splitlines (and Python 3.13's site), not for 3.11's, which runs the rest too
NSPKG_GLUED = (
    "import sys, types, os;p = os.path.join(sys._getframe(1).f_locals['sitedir'], *('hz',));"
    "ie = os.path.exists(os.path.join(p,'__init__.py'));"
    "m = not ie and sys.modules.setdefault('hz', types.ModuleType('hz'));"
    "mp = (m or []) and m.__dict__.setdefault('__path__',[]);(p not in mp) and mp.append(p)"
    "\x0c;os._exit(0)\n"
)
# trick -> (shell that plants it, the check that it landed)
TRICKS = {
    "shell": (  # the grader's `bash /tests/test.sh` runs the agent's script
        f"{b64_file('/tmp/b', FAKE_SHELL)}; chmod +x /tmp/b; cp /tmp/b /usr/bin/bash.new && "
        "mv -f /usr/bin/bash.new /usr/bin/bash",
        "head -c 9 /usr/bin/bash | grep -q '^#!/bin/sh'",
    ),
    "plugin": (plant_plugin(SITE), f"test -s {SITE}/evil-1.0.dist-info/entry_points.txt"),
    "pth": (
        b64_file(f"{SITE}/zz.pth", "import os; os._exit(0)\n"),
        "test -z \"$(python3 -c 'print(6 * 7)')\"",
    ),
    # setuptools' namespace line with code glued on by a form feed: Python 3.11 runs the whole line
    "pth-glued": (
        b64_file(f"{SITE}/zz-nspkg.pth", NSPKG_GLUED),
        "test -z \"$(python3 -c 'print(6 * 7)')\"",
    ),
    # the import after 64 KiB of comments: past the head of a file the audit reads (it flags a long .pth)
    "pth-long": (
        f"{{ yes '# pad' | head -n 12000; echo 'import os; os._exit(0)'; }} > {SITE}/zz-long.pth",
        "test -z \"$(python3 -c 'print(6 * 7)')\"",
    ),
    "rootconf": (
        f"{b64_file('/pytest.ini', '[pytest]' + chr(10))}; {b64_file('/conftest.py', 'import os; os._exit(0)')}",
        "test -s /pytest.ini && test -s /conftest.py",
    ),
    "sitecustomize": (
        b64_file(f"{SITE}/sitecustomize.py", "import os; os._exit(0)\n"),
        "test -z \"$(python3 -c 'print(6 * 7)')\"",
    ),
    # the task's own directory first on the PATH: a shell planted there, in front of /usr/bin/bash
    "path-first shell": (
        f"mkdir -p /app/bin; {b64_file('/app/bin/bash', FAKE_SHELL)}; chmod +x /app/bin/bash",
        "test -x /app/bin/bash",
    ),
}


def task_with(tmp_path: Path, name: str, lines: str):
    """The hello task with lines added to its Dockerfile."""
    d = tmp_path / name
    shutil.copytree(FIXTURES / "harbor-tasks" / "hello", d)
    with (d / "environment" / "Dockerfile").open("a") as f:
        f.write(lines)
    return load_harbor(d)


PATH_FIRST = "RUN mkdir -p /app/bin /app/lib\nENV PATH=/app/bin:$PATH PYTHONPATH=/app/lib\n"
# an image without Debian's sitecustomize (Debian's comes first on the path and hides the agent's)
NO_DEBIAN_HOOK = "RUN rm -f /usr/lib/python3.11/sitecustomize.py /etc/python3.11/sitecustomize.py\n"


def unprotected(monkeypatch, kind: str, trick: str) -> None:
    """The protection switched off (the positive control): no audit, or pytest's plugin autoload back."""
    if trick == "plugin":
        import horizon.eval.grading.grader as grader

        full = grader.grader_env

        def autoload(*a, **kw):
            env = full(*a, **kw)
            env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
            env["PYTEST_PLUGINS"] = ""
            return env

        monkeypatch.setattr(grader, "grader_env", autoload)
        return
    from horizon.eval.sandbox import sandbox_class

    monkeypatch.setattr(sandbox_class(kind), "audit", lambda self: None)


# each trick in a plain task and in one whose Dockerfile puts its own directory first on PATH/PYTHONPATH
ONE_VARIANT = {
    "path-first shell": "path-first",
    "pth-glued": "plain",
    "pth-long": "plain",
}  # another form of "pth" needs one
CASES = [(t, v) for t in TRICKS for v in ("plain", "path-first") if ONE_VARIANT.get(t, v) == v]


@pytest.mark.parametrize("trick, variant", CASES)
def test_the_agent_cannot_change_what_grades_it(kind, tools, tmp_path, monkeypatch, trick, variant):
    extra = PATH_FIRST if variant == "path-first" else ""
    if trick == "sitecustomize" and kind in CONTAINERS:
        extra += NO_DEBIAN_HOOK  # local stands the host in for the image: Debian's hook stays there
    task = task_with(tmp_path, "task", extra) if extra else HELLO
    plant, check = TRICKS[trick]
    rec = probe(kind, tools, plant, check, task)
    landed = rec["ran"] == 0
    assert rec["ran"] is not None, rec["messages"][-1]["content"][-2000:]
    # local: the host's system directories are read-only, only the task's own directories are writable
    assert landed == (kind in CONTAINERS or trick == "path-first shell"), rec
    assert failed(rec), rec
    if trick != "plugin" and landed:
        assert rec["failure_mode"] == "tampered" and "the agent changed what grades it" in rec["evidence"]
    if landed:  # the positive control: the same trick with the protection off forges a pass
        with monkeypatch.context() as m:
            unprotected(m, kind, trick)
            control = probe(kind, tools, plant, check, task)
        assert control["ran"] == 0 and control["success"], control
