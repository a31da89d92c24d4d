"""An overlayfs writable layer, read from the host: what the agent changed, without trusting the sandbox.

A container's (or an apptainer instance's) root is an overlay: the image's read-only lower
directories under one upper directory that receives every write. Read from the host, the upper
directory says exactly what changed (`OverlayLayer.changes`, for the integrity audit): an entry
there that the image also has is changed (copied up), one it lacks is added; a whiteout (a character
device 0/0) is a deletion; an opaque directory (xattr `trusted.overlay.opaque` or, mounted with
userxattr, `user.overlay.opaque` = "y") hides everything the image held below it. The image's side
is the stack of lower directories (top first), with their own whiteouts and opaque directories.

Nothing here follows a symbolic link on the host: every component is looked up with lstat, a file
is opened with O_NOFOLLOW, and a path that would pass through a link inside the sandbox's view is
not found (the audit resolves links itself, inside the sandbox's namespace).

Imports: integrity (its records).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from horizon.eval.sandbox.integrity import HEAD, Change, Entry

HASH_CAP = 256 << 20  # a file's digest covers at most this much (and its size)
OPAQUE = ("trusted.overlay.opaque", "user.overlay.opaque")


def _opaque(path: str) -> bool:
    for name in OPAQUE:
        try:
            if os.getxattr(path, name, follow_symlinks=False) == b"y":
                return True
        except OSError:
            continue
    return False


def _whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def entry_of(host_path: str, st: os.stat_result | None = None) -> Entry:
    """The Entry of a host path (not followed if a link)."""
    st = st or os.lstat(host_path)
    if stat.S_ISDIR(st.st_mode):
        return Entry("dir")
    if stat.S_ISLNK(st.st_mode):
        return Entry("link", target=os.readlink(host_path))
    if not stat.S_ISREG(st.st_mode):
        return Entry("other")
    h, head, left = hashlib.sha256(), b"", HASH_CAP
    fd = os.open(host_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        while left > 0:
            chunk = f.read(min(1 << 20, left))
            if not chunk:
                break
            if len(head) < HEAD:
                head += chunk[: HEAD - len(head)]
            h.update(chunk)
            left -= len(chunk)
    return Entry("file", digest=f"{h.hexdigest()}:{st.st_size}", head=head)


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p and p != "."]


class LowerStack:
    """The image: read-only directories, top first, as overlayfs stacks them."""

    def __init__(self, dirs: list[str | Path]):
        self.dirs = [str(d) for d in dirs]

    def find(self, path: str) -> str | None:
        """The host path that holds `path` in the stack (None: absent, deleted, or behind a link)."""
        parts = _parts(path)
        for layer in self.dirs:
            found, stop = self._in_layer(layer, parts)
            if found is not None or stop:
                return found
        return None

    @staticmethod
    def _in_layer(layer: str, parts: list[str]) -> tuple[str | None, bool]:
        """(host path, whether the layers below are hidden) for `parts` in one layer."""
        cur = layer
        for i, name in enumerate(parts):
            cur = os.path.join(cur, name)
            try:
                st = os.lstat(cur)
            except OSError:
                return None, False
            if _whiteout(st):
                return None, True
            last = i == len(parts) - 1
            if last:
                return cur, True
            if not stat.S_ISDIR(st.st_mode):
                return None, True  # through a link or a file: not a directory of this view
            if _opaque(cur):
                # the rest of the path can only be in this layer
                rest = os.path.join(cur, *parts[i + 1 :])
                try:
                    st2 = os.lstat(rest)
                except OSError:
                    return None, True
                return (None if _whiteout(st2) else rest), True
        return layer, True

    def exists(self, path: str) -> bool:
        return self.find(path) is not None

    def entry(self, path: str) -> Entry | None:
        host = self.find(path)
        if host is None:
            return None
        try:
            return entry_of(host)
        except OSError:
            return None


class OverlayLayer:
    """An upper directory over an image (a LowerStack, or anything with `exists` and `entry`), as a Layer."""

    def __init__(self, upper: str | Path, image):
        self.upper = str(upper)
        self.lower = image

    def image(self, path: str) -> Entry | None:
        return self.lower.entry(path)

    def now(self, path: str) -> Entry | None:
        """The merged view: the upper directory where it holds the path, else the image."""
        cur = self.upper
        parts = _parts(path)
        for i, name in enumerate(parts):
            cur = os.path.join(cur, name)
            try:
                st = os.lstat(cur)
            except OSError:
                return self.image(path)
            if _whiteout(st):
                return None
            if i == len(parts) - 1:
                return entry_of(cur, st)
            if not stat.S_ISDIR(st.st_mode):
                return None
            if _opaque(cur):
                rest = os.path.join(cur, *parts[i + 1 :])
                try:
                    st2 = os.lstat(rest)
                except OSError:
                    return None
                return None if _whiteout(st2) else entry_of(rest, st2)
        return Entry("dir")

    def changes(self) -> list[Change]:
        found: list[tuple[str, str, os.stat_result]] = []
        self._walk(self.upper, "", found)
        if hasattr(self.lower, "prefetch"):  # an image asked in batches (apptainer)
            self.lower.prefetch([p for p, _, st in found if not _whiteout(st)])
        out = []
        for p, host, st in found:
            if _whiteout(st):
                out.append(Change(p, "D"))
                continue
            before = self.lower.exists(p)
            if stat.S_ISDIR(st.st_mode):
                out.append(Change(p, "O" if before and _opaque(host) else ("C" if before else "A")))
            else:
                out.append(Change(p, "C" if before else "A"))
        return out

    def _walk(self, host: str, path: str, out: list) -> None:
        try:
            items = sorted(os.scandir(host), key=lambda e: e.name)
        except OSError:
            return
        for item in items:
            p, st = f"{path}/{item.name}", item.stat(follow_symlinks=False)
            out.append((p, item.path, st))
            if stat.S_ISDIR(st.st_mode):
                self._walk(item.path, p, out)

    def size(self) -> int:
        """Bytes the upper directory holds (its files' allocated blocks)."""
        return allocated_bytes(self.upper)


def allocated_bytes(root: str | Path) -> int:
    """The blocks allocated under `root` (links not followed; what vanishes while walking is skipped)."""
    total = 0
    for dirpath, dirs, files in os.walk(root):
        for n in files + dirs:
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_blocks * 512
            except OSError:
                pass
    return total
