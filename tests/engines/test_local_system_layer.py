"""Issue 51: a Dockerfile's RUN steps may write anywhere in their own root under the local sandbox, as in a
Docker build (`ln -s … /usr/bin/python`, files in /usr/local/bin, the system Python's dist-packages,
/etc, `useradd`, a COPY after a RUN into /usr), in a layer of the sandbox's own over the host's system
directories: the host's never change, its secrets stay unreadable, the agent can change nothing of the
layer, and the integrity audit reads what the build wrote as the image's."""

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from horizon.eval.oracle import run_one
from horizon.eval.sandbox import Unsupported, make_sandbox
from horizon.eval.sandbox.local import syslayer
from horizon.eval.tasks.benchmark import load_harbor, sandbox_spec
from tests.engine_fixtures import ensure_debian_package
from tests.helpers import FIXTURES

pytestmark = pytest.mark.engine
NAME = "horizon-layer-probe"  # no host has a program, a module, a user or a file of this name
DOCKERFILE = f"""FROM horizon-base:bookworm
WORKDIR /app
COPY files/ /app/
RUN printf '#!/bin/sh\\necho from-the-build\\n' > /usr/local/bin/{NAME} && chmod +x /usr/local/bin/{NAME}
RUN ln -sf /usr/bin/python3 /usr/bin/python
RUN echo 'VALUE = 42' > /usr/lib/python3/dist-packages/horizon_layer_probe.py
RUN useradd -m -s /bin/bash hzprobe && echo 'setting=1' > /etc/{NAME}.conf
RUN cp /etc/shadow /app/shadow-seen-by-the-build && (rm -rf /run/horizon/mask/etc/* /run/horizon/layer/*/*; cat /etc/{NAME}-secret-* > /app/secret-seen 2>&1; true)
COPY files/in.txt /usr/local/share/{NAME}/in.txt
ENV PATH=/app/bin:$PATH
"""
TEST = f"""import subprocess

def test_the_image_the_build_made():
    assert subprocess.run(["{NAME}"], capture_output=True, text=True).stdout == "from-the-build\\n"
    out = subprocess.run(["python", "-c", "import horizon_layer_probe as m; print(m.VALUE)"], capture_output=True, text=True)
    assert out.stdout == "42\\n", out.stderr
    assert "hzprobe:" in open("/etc/passwd").read()
    assert open("/etc/{NAME}.conf").read() == "setting=1\\n"
    assert open("/usr/local/share/{NAME}/in.txt").read() == open("/app/in.txt").read()
    assert open("/app/out.txt").read() == "hello\\n"
"""


@pytest.fixture
def layer_task(local_engine, tmp_path):
    if not syslayer.available():
        pytest.skip("the build's layer needs root and a kernel that idmaps mounts (Linux >= 5.19)")
    d = tmp_path / "layer"
    shutil.copytree(FIXTURES / "harbor-tasks" / "hello", d)
    (d / "environment" / "Dockerfile").write_text(DOCKERFILE)
    (d / "tests" / "test_outputs.py").write_text(TEST)
    os.chmod(tmp_path, 0o755)  # the build context, readable by the sandbox's uid
    return load_harbor(d)


def test_the_oracle_passes_a_task_whose_build_writes_into_usr_and_etc(layer_task, tools):
    """Each of these RUN steps failed: `Read-only file system`, `useradd: cannot lock /etc/passwd`; the
    COPY after a RUN into /usr was refused."""
    r = run_one("local", layer_task, tools)
    assert (r.status, r.reward) == ("pass", 1.0), r
    for host in (
        f"/usr/local/bin/{NAME}",
        f"/etc/{NAME}.conf",
        "/usr/lib/python3/dist-packages/horizon_layer_probe.py",
    ):
        assert not os.path.lexists(host), f"the build wrote the host's {host}"
    assert "hzprobe:" not in Path("/etc/passwd").read_text()


@pytest.mark.parametrize("upper", ["disk", "storage-tmpfs"])
def test_the_agent_changes_nothing_of_the_layer_and_the_audit_reads_it_as_the_image(
    layer_task, tools, upper, monkeypatch
):
    """On the host's disk, or where that cannot hold an overlay's upper layer (an overlayfs /tmp), on
    the sandbox's storage tmpfs."""
    if upper != "disk":
        monkeypatch.setattr(syslayer, "UPPERS", syslayer.UPPERS[1:])
    secret = Path(f"/etc/{NAME}-secret-{os.getpid()}")  # a file only the host's root may read
    fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, b"the host's secret\n")
    os.close(fd)
    try:
        with make_sandbox("local", sandbox_spec(layer_task, "layer"), toolchain=tools) as sb:
            check_layer(sb, upper)
    finally:
        secret.unlink()


def check_layer(sb, upper: str) -> None:
    """The build's files, none of the host's secrets, nothing the agent can change, and the audit's view."""
    on_disk = sb.root / "layer" / "usr" / "data" / "local" / "bin" / NAME
    assert on_disk.is_file() == (upper == "disk")
    assert sb.exec([NAME]).stdout == "from-the-build\n"
    # the build read /etc/shadow with every password locked, never the host's hashes
    seen = sb.exec(["cat", "/app/shadow-seen-by-the-build"]).stdout.splitlines()
    assert seen and all(line.split(":")[1] in ("*", "!") for line in seen), seen
    # nor a file only the host's root may read (hidden from the build; unreadable to the agent)
    assert "the host's secret" not in sb.exec(["cat", "/app/secret-seen"]).stdout
    assert sb.exec(["sh", "-c", f"cat /etc/{NAME}-secret-*"]).rc != 0
    for trick in (
        f"echo 'echo forged' > /usr/local/bin/{NAME}",
        "echo 'import os' > /usr/lib/python3/dist-packages/zz-forge.pth",
        "echo x >> /etc/passwd",
        "ln -sf /app/out.txt /usr/bin/python",
    ):
        r = sb.exec(["sh", "-c", trick])
        assert r.rc != 0 and "Read-only file system" in r.stderr, (trick, r)
    # a program of the agent's first on the PATH: harmless where the image has none of its name ...
    plant = "mkdir -p /app/bin && printf '#!/bin/sh\\necho forged\\n' > /app/bin/{0} && chmod +x /app/bin/{0}"
    assert sb.exec(["sh", "-c", plant.format("horizon-own-tool")]).rc == 0
    sb.kill_agent()
    assert sb.audit() is None
    # ... and tampering in front of the one the build installed (the host has none: read from the
    # host, as before, the audit saw nothing in front of it)
    assert sb.exec(["sh", "-c", plant.format(NAME)]).rc == 0
    sb.kill_agent()
    found = sb.audit()
    assert found is not None and found.failure_mode == "tampered", found
    assert f"/app/bin/{NAME}: a program added in front of /usr/local/bin/{NAME}" in found.evidence


def test_a_task_with_the_internet_keeps_its_resolver_over_the_builds_etc(layer_task, tools):
    """The agent's /etc is the build's layer over the host's: slirp4netns's resolver is bound on it again."""
    ensure_debian_package("slirp4netns", "slirp4netns")
    spec = dataclasses.replace(sandbox_spec(layer_task, "layer-net"), allow_internet=True)
    with make_sandbox("local", spec, toolchain=tools) as sb:
        assert sb.exec(["cat", "/etc/resolv.conf"]).stdout == "nameserver 10.0.2.3\n"
        assert sb.exec(["cat", f"/etc/{NAME}.conf"]).stdout == "setting=1\n"


@pytest.mark.parametrize(
    "step, why",
    [
        (
            "RUN head -c 3000000 /dev/zero > /usr/local/lib/big",
            r"wrote \d MB into the system directories, more than the task's storage \(2 MB\)",
        ),
        (
            "RUN cp /bin/tar /app/tar && ln -sf /app/tar /usr/local/bin/tar",
            r"left tar \(/app/tar\) outside the read-only system directories",
        ),
    ],
    ids=["over-storage", "helper-in-app"],
)
def test_a_build_over_its_storage_or_routing_a_helper_to_the_agent_is_unsupported(
    layer_task, tools, step, why
):
    """The layer counts towards the task's storage; the harness runs tar as the sandbox's root after the
    agent, so a build may not leave it where the agent writes."""
    with (Path(layer_task.path) / "environment" / "Dockerfile").open("a") as f:
        f.write(step + "\n")
    spec = dataclasses.replace(sandbox_spec(layer_task, "layer-bad"), storage_mb=2)
    with pytest.raises(Unsupported, match=why):
        with make_sandbox("local", spec, toolchain=tools):
            pass


@pytest.mark.parametrize("base, hidden", [("python:3.12-slim", True), ("debian:bookworm", False)])
def test_a_python_image_stand_in_lets_pip_install_into_the_system(layer_task, tools, base, hidden):
    """Docker's python images carry no EXTERNALLY-MANAGED marker, so `pip install` there installs into
    the system; the host's Debian Python has one (PEP 668), hidden in the build of a FROM python image."""
    markers = sorted(Path("/usr/lib").glob("python3*/EXTERNALLY-MANAGED"))
    if not markers:
        pytest.skip("the host's Python has no EXTERNALLY-MANAGED marker: nothing to hide")
    dockerfile = Path(layer_task.path) / "environment" / "Dockerfile"
    dockerfile.write_text(
        f"FROM {base}\nRUN ls /usr/lib/python3*/EXTERNALLY-MANAGED > /app/markers 2>&1; true\n"
    )
    with make_sandbox("local", sandbox_spec(layer_task, "layer-py"), toolchain=tools) as sb:
        seen = sb.exec(["cat", "/app/markers"]).stdout
    assert (str(markers[0]) in seen) != hidden, seen
