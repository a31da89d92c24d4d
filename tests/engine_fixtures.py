"""Real engines for the engine tests: installed by `make engines`, started and stopped by the tests.

bubblewrap, tmux, Docker, debootstrap and Slurm come from Debian's packages (`make engines`, which
`make test` runs first, so CI never skips them); the daemons are started here and stopped by pid.
"""

import os
import shutil
import subprocess

import pytest


def ensure_debian_package(binary: str, package: str) -> None:
    """The engines are installed by `make engines` (which `make test` runs), never by a test.

    Missing here: a skip with the command to run, or a failure where every engine must run
    (HORIZON_REQUIRE_ENGINES=1, set by `make test`: CI must not skip an engine this machine can run).
    """
    if shutil.which(binary) or os.path.exists(f"/usr/sbin/{binary}"):
        return
    msg = f"{binary} is not installed: run `make engines` (Debian package {package})"
    if os.environ.get("HORIZON_REQUIRE_ENGINES") == "1":
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def local_engine():
    ensure_debian_package("bwrap", "bubblewrap")
    ensure_debian_package("tmux", "tmux")


@pytest.fixture(scope="session")
def tools(local_engine):
    """The graders' toolchain, where sandbox users can read it (pytest's tmp dirs are private)."""
    from horizon.eval.sandbox import toolchain

    with toolchain.temporary() as path:
        yield path


def sandbox_processes() -> list[str]:
    """Command lines of live processes that belong to a horizon sandbox."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "horizon-sandbox-init" in cmd or ("slirp4netns" in cmd and "--userns-path=/proc/self/fd/" in cmd):
            out.append(f"{pid}: {cmd[:200]}")
    return out


def start_dockerd(root):
    """Start dockerd with its state under `root`; returns (process, DOCKER_HOST)."""
    import time

    sock = root / "docker.sock"
    log = open(root / "dockerd.log", "w")
    proc = subprocess.Popen(
        [
            "dockerd",
            "--data-root",
            str(root / "data"),
            "--exec-root",
            str(root / "exec"),
            "--pidfile",
            str(root / "docker.pid"),
            "-H",
            f"unix://{sock}",
            "--iptables=false",
            "--bridge=none",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    host = f"unix://{sock}"
    deadline = time.time() + 60
    while time.time() < deadline:
        if subprocess.run(["docker", "-H", host, "info"], capture_output=True).returncode == 0:
            return proc, host
        time.sleep(0.3)
    proc.kill()
    raise RuntimeError("dockerd did not start: " + (root / "dockerd.log").read_text()[-2000:])


def stop_dockerd(proc) -> None:
    proc.terminate()  # stop the daemon we started, by pid
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="session")
def dockerd(tmp_path_factory):
    """A Docker daemon started by the tests (Debian's docker.io), with a base image built offline
    (debootstrap minbase + tmux + python3, imported: no registry is reachable). Stopped by pid."""
    import time

    if os.geteuid() != 0:
        pytest.skip("starting dockerd needs root")
    ensure_debian_package("dockerd", "docker.io")
    ensure_debian_package("debootstrap", "debootstrap")
    root = tmp_path_factory.mktemp("dockerd")
    proc, host = start_dockerd(root)
    old = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = host
    try:
        from horizon.eval.sandbox.docker.baseimage import build_base_image
        from horizon.eval.sandbox.docker.sandbox import BASE_IMAGE

        t = time.monotonic()
        build_base_image(BASE_IMAGE, workdir=root)
        print(f"\ndocker base image built in {time.monotonic() - t:.0f} s")
        yield host
    finally:
        stop_dockerd(proc)
        if old is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = old
