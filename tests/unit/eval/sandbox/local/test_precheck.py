"""What the local sandbox cannot run is named by `horizon check-tasks --sandbox local` before a run (it
said "ok" for tasks whose replay then failed); what it can run, COPY after RUN included, says ok."""

from pathlib import Path

import pytest

from horizon.cli import main
from horizon.eval.sandbox.local import precheck, syslayer
from horizon.eval.tasks import dockerfile

HEAD = "FROM horizon-base:bookworm\nWORKDIR /app\nRUN echo built > /app/built.txt\n"
TASKS = {  # task -> the Dockerfile's lines after HEAD
    "copy-after-run": "COPY text.txt /app/text.txt\nCOPY text.txt /opt/tool/\n",
    "missing-source": "COPY nowhere.txt /app/\n",
    "into-usr-after-run": "COPY text.txt /usr/local/bin/text\n",
    "into-bin-after-run": "COPY text.txt /bin/\n",  # /bin -> usr/bin on merged-/usr hosts
    "under-proc": "COPY text.txt /proc/x\n",
}


def tb1(root: Path, name: str, body: str, head: str = HEAD) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "task.yaml").write_text("instruction: nothing\ndifficulty: easy\n")
    (d / "run-tests.sh").write_text("#!/bin/bash\ntrue\n")
    (d / "solution.sh").write_text("#!/bin/bash\ntrue\n")
    (d / "Dockerfile").write_text(head + body)
    (d / "text.txt").write_text("text\n")
    return d


@pytest.fixture(params=[True, False], ids=["layer", "no-layer"])
def layer(request, monkeypatch):
    """With and without the build's own layer over the system directories (root and idmapped mounts)."""
    monkeypatch.setattr(syslayer, "available", lambda: request.param)
    return request.param


def test_check_tasks_names_what_the_local_replay_cannot_do_before_a_run(tmp_path, capsys, layer):
    """A COPY after a RUN into /usr is the build's to make where it has a layer of its own."""
    for name, body in TASKS.items():
        tb1(tmp_path, name, body)
    assert main(["check-tasks", str(tmp_path), "--format", "tb1", "--sandbox", "local"]) == 0
    out = {
        line.split()[1]: line for line in capsys.readouterr().out.splitlines() if line[:4] in ("ok  ", "skip")
    }
    assert out["copy-after-run"].startswith("ok ")
    into_system = ("into-usr-after-run", "into-bin-after-run")
    if layer:
        assert all(out[n].startswith("ok ") for n in into_system), out
        assert all(out[n].startswith("skip ") for n in TASKS if n not in ("copy-after-run", *into_system))
        return
    assert out["missing-source"].endswith(
        "Dockerfile: line 4: COPY: nowhere.txt: no such file in the build context"
    )
    assert (
        "Dockerfile: line 4: COPY: /usr/local/bin/text after a RUN: the host's system directories (/usr)"
        in (out["into-usr-after-run"])
    )
    if Path("/bin").is_symlink():
        assert "(/usr) are read-only while the build runs" in out["into-bin-after-run"]
    assert "/proc/x is under /proc, which the sandbox keeps for itself" in out["under-proc"]
    assert all(out[n].startswith("skip ") for n in TASKS if n != "copy-after-run")


def test_a_source_this_uid_cannot_read_is_named(tmp_path, monkeypatch):
    """A harness that is not root cannot read what only root may (Docker's daemon can): named with the
    file. (The tests run as root, who reads everything: the permission answer is what is given here.)"""
    d = tb1(tmp_path, "secret", "COPY conf/ /app/conf/\n")
    (d / "conf" / "deep").mkdir(parents=True)
    (d / "conf" / "deep" / "key").write_text("k")
    real = precheck.os.access
    monkeypatch.setattr(precheck.os, "access", lambda p, mode: real(p, mode) and Path(p).name != "key")
    plan = dockerfile.plan(d / "Dockerfile")
    [reason] = precheck.source_reasons(plan, d)
    assert reason.startswith(
        "Dockerfile: line 4: COPY: conf/deep/key in the build context is not readable by uid "
    )
    assert "run the harness as root, or make it readable" in reason


def test_a_harness_that_is_not_root_is_told_once_what_differs(caplog):
    from horizon.eval.sandbox.local.hostfs import warn_not_root

    warn_not_root.cache_clear()
    with caplog.at_level("WARNING", logger="horizon.eval.sandbox"):
        warn_not_root(1234)
        warn_not_root(1234)  # every sandbox of the run: said once
    [record] = caplog.records
    assert "runs as uid 1234, not root" in record.message
    assert "build-context files only root can read cannot be copied" in record.message
    assert "owners and modes inside the sandbox are Docker's either way" in record.message


def test_check_tasks_names_images_the_host_cannot_stand_in_for_users_and_missing_solutions(
    tmp_path, capsys, layer
):
    """Issue 51: these built or started, then failed at run time (`apk: not found`, `go: command not found`,
    useradd unable to lock /etc/passwd), or had no reference solution, while check-tasks said ok. Users
    made by a RUN are the build's to make where it has a layer of its own over /etc; USER stays refused."""
    tb1(tmp_path, "alpine", "RUN apk add curl\n", head="FROM alpine:3.19\n")
    tb1(tmp_path, "ubuntu", "RUN true\n", head="FROM ghcr.io/laude-institute/t-bench/ubuntu-24-04:latest\n")
    tb1(tmp_path, "users", "RUN useradd -m agent && echo ok\n")
    tb1(tmp_path, "user-agent", "RUN useradd -m agent\nUSER agent\n")
    tb1(tmp_path, "user-owned", "RUN mkdir -p /app && chown -R agent:agent /app && chown root:0 /app\n")
    (tb1(tmp_path, "no-solution", "") / "solution.sh").unlink()
    assert main(["check-tasks", str(tmp_path), "--format", "tb1", "--sandbox", "local"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        "skip   alpine  unsupported by the local sandbox: Dockerfile: FROM alpine:3.19: another distribution's "
        "image (the host's Debian userland stands in for FROM)"
    ) in out
    assert any(line.startswith("ok     ubuntu ") for line in out)  # Debian's family: the host stands in
    users = (
        "skip   users  unsupported by the local sandbox: Dockerfile: line 4: RUN: useradd: users other than root "
        "(/etc/passwd is the host's, read-only: the build has no layer of its own over it without root and "
        "idmapped mounts)"
    )
    assert (users in out) != layer and any(line.startswith("ok     users ") for line in out) == layer, out
    assert any(
        line.startswith("skip   user-agent ")
        and "line 5: USER: agent (the local sandbox has only root)" in line
        for line in out
    ), out
    assert (
        "warn   no-solution: solution.sh: -: no reference solution (horizon oracle cannot check the task)"
        in out
    )


def test_a_language_image_needs_its_toolchain_on_the_host():
    plan = dockerfile.Plan("Dockerfile", "docker.io/library/golang:1.22-bookworm")
    assert precheck.base_reasons(plan, which=lambda tool: None) == [
        "Dockerfile: FROM docker.io/library/golang:1.22-bookworm: a golang image, and the host (which stands "
        "in for it) has no go"
    ]
    assert precheck.base_reasons(plan, which=lambda tool: f"/usr/bin/{tool}") == []
    assert (
        precheck.base_reasons(dockerfile.Plan("Dockerfile", "python:3.13-slim"), which=lambda t: None) == []
    )
