"""The integrity audit in the local sandbox: the writable directories that decide a grade, before and after.

The system directories are read-only in the sandbox (the host's, with the build's layer over them:
syslayer.py), so the agent cannot change its shell, the image's Python or its libraries. What it can
write are the task's own top-level directories (/app, and
those the Dockerfile's RUN steps made, such as /opt/venv): a directory of the image's PATH or a
Python installed there (`ENV PATH=/app/bin:$PATH`, a virtual environment made by RUN) decides what
the grader runs as much as /usr/bin does. Those are watched: each directory of the PATH that lies in
a writable top (its entries), each Python site directory and standard library there (recursively),
scanned once after the build (the image) and again after the agent (now). The harness reads them
itself, from the host, through /proc/PID/root of the sandbox's pid 1 (View: each link on the way
resolved inside the sandbox's root, never the host's; nothing of the sandbox runs, its python3 may be
the build's). The two scans make an integrity.SnapshotLayer; the system directories are read the
same way, as the sandbox holds them (the build's layer included: the image's side of every rule).

Imports: integrity, overlay (entry_of).
"""

from __future__ import annotations

import os
import posixpath
import stat

from horizon.eval.sandbox import SandboxError
from horizon.eval.sandbox.integrity import HEAD, Entry, resolve


class View:
    """The sandbox's files as its own processes see them, read from the host through /proc/PID/root of its
    pid 1: every link on the way resolved inside the sandbox's root (never the host's), the last
    component never followed. Nothing of the sandbox runs for it (its programs may be the build's)."""

    def __init__(self, init_pid: int):
        self.root = f"/proc/{init_pid}/root"
        self._seen: dict[str, Entry | None] = {}

    def lookup(self, path: str) -> Entry | None:
        """The entry at `path` (kind and link target only), its parents already free of links."""
        if path not in self._seen:
            try:
                st = os.lstat(self.root + path)
            except OSError:
                self._seen[path] = None
            else:
                target = os.readlink(self.root + path) if stat.S_ISLNK(st.st_mode) else ""
                self._seen[path] = Entry(_kind(st.st_mode), target=target)
        return self._seen[path]

    def host(self, path: str) -> str:
        """The host path of `path` in the sandbox: its parent resolved inside, its last component as is."""
        parent, name = posixpath.split(posixpath.normpath("/" + path))
        return self.root + posixpath.join(resolve(parent, self.lookup), name)

    def entry(self, path: str) -> Entry | None:
        from horizon.eval.sandbox.overlay import entry_of

        try:
            return entry_of(self.host(path))
        except OSError:
            return None


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "dir"
    return "link" if stat.S_ISLNK(mode) else "file" if stat.S_ISREG(mode) else "other"


class _Scan:
    """The watched entries of one view: [kind, target, size, inode, ctime, first bytes] by path."""

    def __init__(self, view: View):
        self.view, self.out, self.sites = view, {}, []

    def one(self, path: str, host: str, head: bool) -> str | None:
        try:
            st = os.lstat(host)
        except OSError:
            return None
        kind = _kind(st.st_mode)
        target = os.readlink(host) if kind == "link" else ""
        first = b""
        if kind == "file" and head:
            try:
                fd = os.open(host, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                with os.fdopen(fd, "rb") as f:
                    first = f.read(HEAD)
            except OSError:
                pass
        digest = (
            f"{st.st_size}:{st.st_ino}:{st.st_ctime_ns}" if kind == "file" else ""
        )  # ctime: no write unseen
        self.out[path] = Entry(kind, target=target, digest=digest, head=first)
        return kind

    def walk(self, path: str, host: str, deep: bool, heads: bool) -> None:
        if self.one(path, host, False) != "dir":
            return
        try:
            names = sorted(os.listdir(host))
        except OSError:
            return
        for n in names:
            kind = self.one(f"{path}/{n}", f"{host}/{n}", heads)
            if deep and kind == "dir":
                self.walk(f"{path}/{n}", f"{host}/{n}", True, False)

    def find(self, path: str, host: str, depth: int) -> None:
        """Python site directories under `path`, 5 levels at most, no link followed."""
        try:
            items = sorted(os.scandir(host), key=lambda e: e.name)
        except OSError:
            return
        for e in items:
            if not e.is_dir(follow_symlinks=False) or e.name in ("node_modules", ".git", "__pycache__"):
                continue
            if e.name in ("site-packages", "dist-packages"):
                self.sites.append(f"{path}/{e.name}".replace("//", "/"))
            elif depth > 1:
                self.find(f"{path}/{e.name}".replace("//", "/"), e.path, depth - 1)


def watched(path: str, system: tuple[str, ...]) -> dict:
    """The first scan's request: the PATH directories outside the host's system directories and their
    parents (their entries, with their first bytes), and the other top-level directories searched for
    Python site directories."""
    fixed = {*system, "proc", "dev", "sys", "opt/horizon"}
    dirs = [d for d in path.split(":") if d.startswith("/") and d.strip("/").split("/")[0] not in fixed]
    flat = list(dict.fromkeys(dirs + [posixpath.dirname(d) for d in dirs if posixpath.dirname(d) != "/"]))
    return {"flat": flat, "deep": [], "find": [], "find_tops": sorted(fixed)}


def scan(sb, request: dict) -> tuple[dict[str, Entry], list[str]]:
    """The entries of the requested directories as the sandbox holds them, read from the host (View);
    the site directories found under the top-level directories not in `find_tops`."""
    view = View(sb.init_pid)
    sc = _Scan(view)
    skip = set(request.get("find_tops", []))
    try:
        tops = sorted(os.listdir(view.root + "/"))
    except OSError as e:
        raise SandboxError(f"{sb.spec.name}: reading the sandbox for the audit failed: {e}") from None
    for d in tops:
        st = os.lstat(f"{view.root}/{d}")
        if d not in skip and stat.S_ISDIR(st.st_mode):
            sc.find(f"/{d}", f"{view.root}/{d}", 5)
    for d in request["flat"]:
        sc.walk(d, view.host(d), False, True)
    for d in dict.fromkeys(request["deep"] + sc.sites):
        sc.walk(d, view.host(d), True, True)
    return sc.out, sc.sites


def system_entry(view: View, path: str, system: tuple[str, ...]) -> Entry | None:
    """A path of the system directories as the sandbox holds them (the host's, and the build's layer
    over them: read-only to the agent, so this is the image's side and the agent's alike)."""
    if path.strip("/").split("/", 1)[0] not in system:
        return None
    return view.entry(path)
