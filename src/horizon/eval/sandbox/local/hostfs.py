"""Host-side pieces of the local sandbox: its uid, its directory, the host tools it needs, sweeping.

The sandbox's host directory holds only what the agent never writes: the task's files (the lower,
read-only layer of /app), a copy of the toolchain where the original is not readable by the
sandbox's uid, and resolv.conf for sandboxes with a network. Its name carries the harness's pid,
so that `sweep_dirs` can remove what killed runs left.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

from horizon.eval.sandbox import SandboxError, SandboxSpec
from horizon.eval.sandbox.local import imagebuild, syslayer
from horizon.eval.sandbox.local.precheck import image_name

log = logging.getLogger("horizon.eval.sandbox")
UID_BASE, UID_COUNT = 200000, 4096
LOCK_DIR = Path(tempfile.gettempdir()) / "horizon-sandbox-uids"
DIR_PREFIX = "horizon-sb-"
# the environment of the host-side helpers (nsenter, slirp4netns): nothing of the harness's own
HOST_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


def host_tool(name: str, package: str) -> str:
    path = shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.path.exists(p)), None
    )
    if not path:
        raise SandboxError(f"the local sandbox needs {name}: install it (Debian: apt-get install {package})")
    return path


@functools.cache
def warn_not_root(uid: int) -> None:
    """Once per process: what differs from a harness run as root (docs/evaluation/sandboxes.md)."""
    log.warning(
        "the local sandbox runs as uid %d, not root: build-context files only root can read cannot be "
        "copied (Docker's daemon reads them as root; check-tasks --sandbox local names them), the agent's "
        "processes run under uid %d itself (as root each sandbox gets a uid of its own), and without a "
        "delegated cgroup the limits are per-process rlimits; owners and modes inside the sandbox are "
        "Docker's either way (docs/evaluation/sandboxes.md)",
        uid,
        uid,
    )


class UidLease:
    """An unprivileged uid for one sandbox, held by an flock (released when the process dies)."""

    def __init__(self):
        LOCK_DIR.mkdir(mode=0o755, exist_ok=True)
        start = (os.getpid() * 7919) % UID_COUNT  # spread concurrent jobs over the range
        for i in range(UID_COUNT):
            uid = UID_BASE + (start + i) % UID_COUNT
            fh = open(LOCK_DIR / f"{uid}.lock", "w")
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.close()
                continue
            self.uid, self._fh = uid, fh
            return
        raise SandboxError(f"no free sandbox uid in {UID_BASE}..{UID_BASE + UID_COUNT - 1}")

    def release(self) -> None:
        try:
            fcntl.flock(self._fh, fcntl.LOCK_UN)
        finally:
            self._fh.close()


def as_uid(setpriv: str, uid: int) -> list[str]:
    """The argv prefix that runs a program as `uid` (its group too, no supplementary groups): a sandbox's
    bubblewrap, its network helper, the stop's kill."""
    return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]


def world_readable(path: Path) -> bool:
    """Can any user reach and read `path` (o+x on every parent, o+rx on it)?"""
    p = Path(path).resolve()
    if not os.stat(p).st_mode & 0o005 == 0o005:
        return False
    return all(os.stat(q).st_mode & 0o001 for q in p.parents)


def user_processes(uid: int) -> int:
    n = 0
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.stat(f"/proc/{d}").st_uid == uid:
                    n += 1
            except OSError:
                pass
    return n


def _chown_tree(path: Path, uid: int) -> None:
    os.chown(path, uid, uid)
    for dirpath, dirnames, filenames in os.walk(path):
        for n in dirnames + filenames:
            os.chown(os.path.join(dirpath, n), uid, uid, follow_symlinks=False)


def prepare_root(spec: SandboxSpec, toolchain: Path | None, owner: int | None):
    """(the sandbox's host directory, the toolchain path to bind, the LocalImage of the task's Dockerfile):
    owned by `owner` (the sandbox's uid). The staged image is root/image (imagebuild.prepare)."""
    if toolchain is not None and not (toolchain / "home").is_dir():
        raise SandboxError(f"the graders' toolchain {toolchain} is missing or incomplete (toolchain.build)")
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", spec.name)[:40]
    root = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-{name}-"))
    try:
        image = imagebuild.prepare(spec, root)
        if image.inside:
            imagebuild.write_build_files(root)
            if owner is not None and syslayer.available():  # a layer of its own over /usr, /etc...
                image.layer = syslayer.prepare(root, image_name(image.base) in ("python", "pypy"))
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    imagebuild.set_mtimes(root / "image")
    tools = toolchain
    if tools is not None and not world_readable(tools):  # behind a private directory (a 0700 home)
        shutil.copytree(tools, root / "tools", symlinks=True)
        tools = root / "tools"
    if spec.allow_internet:
        (root / "resolv.conf").write_text("nameserver 10.0.2.3\n")  # slirp4netns's DNS forwarder
    if owner is not None:
        _chown_tree(root, owner)
    return root, tools, image


def sweep_dirs(prefix: str = DIR_PREFIX) -> int:
    """Remove the temporary directories of harness processes that are gone (`{prefix}{pid}-...`)."""
    removed = 0
    for d in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        owner = d.name[len(prefix) :].split("-", 1)[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            shutil.rmtree(d, ignore_errors=True)
            removed += not d.exists()
    return removed
