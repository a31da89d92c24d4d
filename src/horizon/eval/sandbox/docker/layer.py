"""A container's writable layer as the integrity audit reads it: from the daemon's side, never from inside.

On a local daemon with overlay2 (the daemon's data on this host, as in CI and on a workstation), the
container's upper directory and the image's lower directories (GraphDriver's UpperDir / LowerDir)
are read directly (sandbox/overlay.py): the cost is that of what changed. Otherwise (a remote
daemon, another storage driver) the daemon's own list of changes (`docker diff`; with Docker 20.10
it walks the whole image, 0.3-1.7 s here) and `get_archive` of each path asked, from the container
and from a container of the same image that is created and never started (one per image and job,
labelled with the run and removed at exit or by the next job's sweep).

Imports: integrity, overlay, docker.image (the SDK's errors).
"""

from __future__ import annotations

import atexit
import hashlib
import io
import os
import tarfile
import threading

from horizon.eval.sandbox import SandboxError
from horizon.eval.sandbox.docker.image import sdk_errors
from horizon.eval.sandbox.integrity import HEAD, Change, Entry
from horizon.eval.sandbox.overlay import HASH_CAP, LowerStack, OverlayLayer

PRISTINE_LABEL = "horizon.pristine"
_KINDS = {0: "C", 1: "A", 2: "D"}
_pristine: dict[tuple[str, str], object] = {}
_guard = threading.Lock()


def layer_of(container, run: str = ""):
    """The audit's view of `container` (reloaded): its overlay read from the host where it can be."""
    container.reload()
    driver = container.attrs.get("GraphDriver") or {}
    data = driver.get("Data") or {}
    upper, lowers = data.get("UpperDir"), (data.get("LowerDir") or "").split(":")
    if driver.get("Name") in ("overlay2", "overlay") and upper and os.path.isdir(upper):
        if all(os.path.isdir(d) for d in lowers if d):
            return OverlayLayer(upper, LowerStack([d for d in lowers if d]))
    return ApiLayer(container, pristine(container, run))


def _entry(container, path: str) -> Entry | None:
    """`path` in a container through the archive API (the path's last component not followed)."""
    daemon, missing = sdk_errors()
    try:
        stream, _ = container.get_archive(path)
    except missing:
        return None
    except daemon as e:
        raise SandboxError(f"reading {path} from the container for the integrity audit failed: {e}") from None
    reader = ArchiveStream(stream)
    with tarfile.open(fileobj=reader, mode="r|") as tar:
        member = tar.next()
        if member is None:
            return None
        if member.isdir():
            return Entry("dir")
        if member.issym():
            return Entry("link", target=member.linkname)
        if not member.isfile():
            return Entry("other")
        f = tar.extractfile(member)
        h, head, left = hashlib.sha256(), b"", HASH_CAP
        while left > 0:
            chunk = f.read(min(1 << 20, left))
            if not chunk:
                break
            head += chunk[: max(0, HEAD - len(head))]
            h.update(chunk)
            left -= len(chunk)
        return Entry("file", digest=f"{h.hexdigest()}:{member.size}", head=head)


class ArchiveStream(io.RawIOBase):
    """A file over the SDK's chunk iterator (tarfile reads the archive as a stream)."""

    def __init__(self, chunks):
        self.chunks, self.buf = iter(chunks), b""

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not self.buf:
            try:
                self.buf = next(self.chunks)
            except StopIteration:
                return 0
        n = min(len(b), len(self.buf))
        b[:n], self.buf = self.buf[:n], self.buf[n:]
        return n


def first_file(stream, limit: int) -> bytes:
    """The first `limit` bytes of the single file in a get_archive stream (the rest is not read)."""
    with tarfile.open(fileobj=ArchiveStream(stream), mode="r|") as tar:
        member = tar.next()
        f = tar.extractfile(member) if member is not None else None
        return f.read(limit) if f is not None else b""


class _Pristine:
    """The image's files, read from a container of it that never ran."""

    def __init__(self, container):
        self.container = container
        self.cache: dict[str, Entry | None] = {}

    def entry(self, path: str) -> Entry | None:
        if path not in self.cache:
            self.cache[path] = _entry(self.container, path)
        return self.cache[path]

    def exists(self, path: str) -> bool:
        return self.entry(path) is not None


def pristine(container, run: str = "") -> _Pristine:
    """A created, never started container of `container`'s image (one per image, daemon and job)."""
    client = container.client
    key = (str(client.api.base_url), container.image.id)
    with _guard:
        if key not in _pristine:
            daemon, _ = sdk_errors()
            try:
                ct = client.containers.create(
                    container.image.id,
                    command=["true"],
                    labels={PRISTINE_LABEL: "1", "horizon.run": run},
                    network_mode="none",
                )
            except daemon as e:
                raise SandboxError(
                    f"creating a pristine container of {container.image.id} failed: {e}"
                ) from None
            _pristine[key] = _Pristine(ct)
        return _pristine[key]


class ApiLayer:
    """The container's changes through the daemon's API."""

    def __init__(self, container, image: _Pristine):
        self.container, self.pristine = container, image

    def changes(self) -> list[Change]:
        daemon, _ = sdk_errors()
        try:
            diff = self.container.diff() or []
        except daemon as e:
            raise SandboxError(f"docker diff failed: {e}") from None
        return [Change(d["Path"], _KINDS.get(d["Kind"], "C")) for d in diff]

    def now(self, path: str) -> Entry | None:
        return _entry(self.container, path)

    def image(self, path: str) -> Entry | None:
        return self.pristine.entry(path)


def remove_pristine() -> None:
    """Remove this process's pristine containers (at exit)."""
    daemon, missing = sdk_errors()
    with _guard:
        items = list(_pristine.values())
        _pristine.clear()
    for p in items:
        try:
            p.container.remove(force=True)
        except (daemon, missing):
            pass


atexit.register(remove_pristine)
