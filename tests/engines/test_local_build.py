"""A Terminal-Bench v1 task whose Dockerfile COPYs files after a RUN, under the local sandbox as under
Docker: the files, their modes and (as root) their owners, root:root whoever owns them in the build
context (Docker's COPY without --chown); and its RUN steps with the network, as `docker build` gives
them, while the runtime keeps the task's own."""

import http.server
import io
import os
import subprocess
import tarfile
import tempfile
import threading
from pathlib import Path

import pytest

from horizon.eval.sandbox import make_sandbox
from horizon.eval.tasks.benchmark import load_tb1, sandbox_spec
from tests.engine_fixtures import ensure_debian_package

pytestmark = pytest.mark.engine
DOCKERFILE = """FROM horizon-base:bookworm
WORKDIR /app
RUN echo built > /app/built.txt && mkdir -m 700 /app/keep
COPY text.txt /app/text.txt
COPY run.sh /app/bin/
COPY data/ /app/keep/
ADD bundle.tar /app/unpacked/
RUN cat /app/text.txt > /app/seen-by-run.txt
"""
# what a command in the image prints (Docker's: COPY gives root:root and keeps the sources' modes; a
# directory a RUN made keeps its own; missing parents are 0755)
PROBE = 'cd /app && find . | sort | while read -r f; do stat -c "%n %a %U:%G" "$f"; done; cat text.txt keep/sub/f.txt seen-by-run.txt'
EXPECTED = """. 755 root:root
./bin 755 root:root
./bin/run.sh 750 root:root
./built.txt 644 root:root
./keep 700 root:root
./keep/sub 700 root:root
./keep/sub/f.txt 600 root:root
./seen-by-run.txt 644 root:root
./text.txt 640 root:root
./unpacked 755 root:root
./unpacked/x.txt 644 root:root
text
inner
text
"""


def tb1_task(root):
    """A TB1 task directory: task.yaml, run-tests.sh, its tests, and a Dockerfile with COPY after RUN whose
    sources have modes of their own and an owner that is not root."""
    d = root / "copy-after-run"
    (d / "tests").mkdir(parents=True)
    (d / "task.yaml").write_text("instruction: nothing to do\ndifficulty: easy\nparser_name: pytest\n")
    (d / "run-tests.sh").write_text("#!/bin/bash\ntrue\n")
    (d / "tests" / "test_outputs.py").write_text("def test_nothing():\n    pass\n")
    (d / "Dockerfile").write_text(DOCKERFILE)
    for name, text, mode in (("text.txt", "text\n", 0o640), ("run.sh", "#!/bin/sh\necho run\n", 0o750)):
        (d / name).write_text(text)
        (d / name).chmod(mode)
    (d / "data" / "sub").mkdir(parents=True)
    (d / "data" / "sub" / "f.txt").write_text("inner\n")
    (d / "data" / "sub" / "f.txt").chmod(0o600)
    (d / "data" / "sub").chmod(0o700)
    with tarfile.open(d / "bundle.tar", "w") as tar:
        info = tarfile.TarInfo("x.txt")
        info.size, info.mode = 4, 0o644
        tar.addfile(info, io.BytesIO(b"tar\n"))
    if os.geteuid() == 0:  # a context file of another owner: COPY still gives root:root
        os.chown(d / "text.txt", 1234, 1234)
    return load_tb1(d)


@pytest.fixture
def shared_dir():
    """A directory every uid can read, as a checkout of a benchmark usually is (pytest's tmp_path is
    private: the sandbox then got a copy of the context it owned, which hid the failure)."""
    with tempfile.TemporaryDirectory(prefix="horizon-copy-after-run-") as d:
        os.chmod(d, 0o755)
        yield Path(d)


def observe(kind: str, task, tools) -> str:
    with make_sandbox(kind, sandbox_spec(task, f"copy-{kind}"), toolchain=tools) as sb:
        r = sb.exec(["sh", "-c", PROBE], timeout=60)
        assert r.rc == 0, r
        return r.stdout


def test_a_tb1_task_copying_after_a_run_starts_with_dockers_files_modes_and_owners(
    local_engine, tools, shared_dir
):
    """It could not start as root: `cp: failed to preserve ownership for '/app/text.txt'`."""
    assert observe("local", tb1_task(shared_dir), tools) == EXPECTED


@pytest.mark.slow
def test_the_same_task_under_docker_reads_the_same(dockerd, tools, shared_dir):
    """The expectation above is Docker's own: the tests' daemon builds the same task."""
    assert observe("docker", tb1_task(shared_dir), tools) == EXPECTED


FETCH = """FROM horizon-base:bookworm
RUN python3 -c "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())" \\
    http://{ip}:{port}/pkg > /app/fetched.txt
"""
PROBE_NET = "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3); print('reached')"


def test_build_steps_get_the_network_and_the_runtime_keeps_the_tasks(local_engine, tools, shared_dir):
    """A RUN that fetches (pip install, an installer) failed: the replay built before any network existed,
    although `docker build` gives build steps the network. The task asks for none at run time: it has none."""
    ensure_debian_package("slirp4netns", "slirp4netns")
    ip = next((a for a in subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
               if "." in a and not a.startswith("127.")), None)  # fmt: skip
    assert ip, "this machine has no IPv4 address besides loopback: the build has no host address to reach"

    class Package(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"package from the network")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), Package)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        task = tb1_task(shared_dir)
        (Path(task.path) / "Dockerfile").write_text(FETCH.format(ip=ip, port=server.server_port))
        with make_sandbox("local", sandbox_spec(task, "build-net"), toolchain=tools) as sb:
            assert sb.exec(["cat", "/app/fetched.txt"]).stdout == "package from the network\n"
            runtime = sb.exec(["python3", "-c", PROBE_NET, ip, str(server.server_port)], timeout=20)
            assert "reached" not in runtime.stdout and "Network is unreachable" in runtime.stderr, runtime
            assert "tap0" not in sb.exec(["cat", "/proc/net/dev"]).stdout  # only loopback is left
            assert sb.net is None  # no slirp4netns runs on for it
    finally:
        server.shutdown()
        server.server_close()


ROOT_FILES = {
    "with-run": """FROM horizon-base:bookworm
COPY run.sh /early.sh
RUN echo built > /app/built.txt
COPY text.txt /late.txt
RUN chmod 600 /late.txt
""",
    "without-run": "FROM horizon-base:bookworm\nCOPY run.sh /early.sh\n",
}


@pytest.mark.parametrize("form", list(ROOT_FILES))
def test_a_file_copied_into_the_root_is_a_file_there(local_engine, tools, shared_dir, form):
    """`COPY entrypoint.sh /entrypoint.sh` made /entrypoint.sh a directory (an overlay's mount point), and
    the next RUN's chmod failed: `tar: ./entrypoint.sh: Cannot open: File exists` (harbor's hello-healthcheck)."""
    task = tb1_task(shared_dir)
    (Path(task.path) / "Dockerfile").write_text(ROOT_FILES[form])
    with make_sandbox("local", sandbox_spec(task, f"root-{form}"), toolchain=tools) as sb:
        r = sb.exec(["sh", "-c", "stat -c '%n %F %a' /early.sh /late.txt 2>&1; cat /early.sh"], timeout=60)
    late = "/late.txt regular file 600" if form == "with-run" else "No such file"
    assert "/early.sh regular file 750" in r.stdout and late in r.stdout and "echo run" in r.stdout, r
