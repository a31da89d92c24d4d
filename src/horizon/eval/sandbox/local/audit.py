"""The integrity audit in the local sandbox: the writable directories that decide a grade, before and after.

The host's system directories are read-only in the sandbox, so the agent cannot change its shell, the
host's Python or its libraries. What it can write are the task's own top-level directories (/app, and
those the Dockerfile's RUN steps made, such as /opt/venv): a directory of the image's PATH or a
Python installed there (`ENV PATH=/app/bin:$PATH`, a virtual environment made by RUN) decides what
the grader runs as much as /usr/bin does. Those are watched: each directory of the PATH that lies in
a writable top (its entries), each Python site directory and standard library there (recursively),
scanned once after the build (the image) and again after the agent (now). The scan runs inside the
sandbox's mount namespace (run_from_host) with the host's own Python (the sandbox's /usr is the
host's, read-only): `-I -S`, nothing of the sandbox's on its path, no link followed. The two scans
make an integrity.SnapshotLayer; paths outside the watched ones are the host's, read on the host.

Imports: integrity, overlay (entry_of for host paths).
"""

from __future__ import annotations

import base64
import json
import os
import posixpath

from horizon.eval.sandbox import SandboxError
from horizon.eval.sandbox.integrity import HEAD, Entry

# runs inside: {"flat": [dirs], "deep": [dirs], "find": [tops]} -> {"entries": {path: [kind, target, size,
# ino, ctime_ns, head_b64]}, "sites": [site directories found under the tops, 5 levels at most]}
SCAN = r"""
import base64, json, os, stat, sys
HEAD_BYTES = int(sys.argv[1])
req = json.loads(sys.stdin.read()); out = {}
def one(p, head):
    try: st = os.lstat(p)
    except OSError: return None
    m = st.st_mode
    k = "dir" if stat.S_ISDIR(m) else "link" if stat.S_ISLNK(m) else "file" if stat.S_ISREG(m) else "other"
    t = os.readlink(p) if k == "link" else ""
    h = ""
    if k == "file" and head:
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as f: h = base64.b64encode(f.read(HEAD_BYTES)).decode()
        except OSError: pass
    out[p] = [k, t, st.st_size, st.st_ino, st.st_ctime_ns, h]
    return k
def walk(d, deep, heads):
    if one(d, False) != "dir": return
    try: names = sorted(os.listdir(d))
    except OSError: return
    for n in names:
        p = os.path.join(d, n)
        k = one(p, heads)
        if deep and k == "dir": walk(p, True, False)
sites = []
def find(d, depth):
    try: items = sorted(os.scandir(d), key=lambda e: e.name)
    except OSError: return
    for e in items:
        if not e.is_dir(follow_symlinks=False) or e.name in ("node_modules", ".git", "__pycache__"): continue
        if e.name in ("site-packages", "dist-packages"): sites.append(e.path)
        elif depth > 1: find(e.path, depth - 1)
skip = set(req.get("find_tops", []))
for d in sorted(os.listdir("/")):
    if d not in skip and os.path.isdir("/" + d) and not os.path.islink("/" + d): find("/" + d, 5)
for d in req["flat"]: walk(d, False, True)
for d in req["deep"] + sites: walk(d, True, True)
json.dump({"entries": out, "sites": sites}, sys.stdout)
"""


def watched(path: str, system: tuple[str, ...]) -> dict:
    """The first scan's request: the PATH directories outside the host's system directories and their
    parents (their entries, with their first bytes), and the other top-level directories searched for
    Python site directories."""
    fixed = {*system, "proc", "dev", "sys", "opt/horizon"}
    dirs = [d for d in path.split(":") if d.startswith("/") and d.strip("/").split("/")[0] not in fixed]
    flat = list(dict.fromkeys(dirs + [posixpath.dirname(d) for d in dirs if posixpath.dirname(d) != "/"]))
    return {"flat": flat, "deep": [], "find": [], "find_tops": sorted(fixed)}


def scan(sb, request: dict, python: str) -> tuple[dict[str, Entry], list[str]]:
    """The entries of the requested directories, read inside the sandbox by the host's Python."""
    r = sb.run_from_host(
        [python, "-I", "-S", "-c", SCAN, str(HEAD)],
        input=json.dumps(request).encode(),
        privileged=True,
        timeout=120,
    )
    if r.rc != 0:
        raise SandboxError(f"{sb.spec.name}: scanning the sandbox for the audit failed: {r.stderr[-300:]!r}")
    found = json.loads(r.stdout)
    out = {}
    for p, (kind, target, size, ino, ctime, head) in found["entries"].items():
        digest = f"{size}:{ino}:{ctime}" if kind == "file" else ""  # ctime: no write goes unseen
        out[p] = Entry(kind, target=target, digest=digest, head=base64.b64decode(head))
    return out, found["sites"]


def host_entry(path: str, system: tuple[str, ...]) -> Entry | None:
    """A path of the host's read-only system directories (the sandbox's /usr is the host's)."""
    from horizon.eval.sandbox.overlay import entry_of

    if path.strip("/").split("/", 1)[0] not in system:
        return None
    try:
        return entry_of(path) if os.path.lexists(path) else None
    except OSError:
        return None
