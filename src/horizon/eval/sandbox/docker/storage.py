"""The task's storage_mb under docker: enforced where the storage driver can, watched everywhere.

Docker limits a container's writable layer (`storage_opt={"size": ...}`) only on overlay2 over xfs
mounted with pquota, devicemapper, btrfs and zfs; whether this daemon can is learnt from its answer
to the first container that asks (once per daemon and process). Everywhere, a thread watches the
layer's size while the attempt runs; over the limit it calls `on_exceed` once (the sandbox then
stops the container: the writer ends at once, and the attempt is the agent's `sandbox_exhausted`).
The layer's size is read from its upper directory where the daemon keeps it on this host (overlay's
UpperDir: a walk of what the container wrote, milliseconds), else from the daemon's API (`SizeRw`,
what `docker ps -s` shows), which walks the layer's files too, plus the API's own latency (Podman's
0.2-0.3 s on a loaded 2-core machine let `dd` write 350 MB more before the stop), so it is measured only
when there is a reason (`due`). On a local daemon the watch reads
the daemon's disk (statvfs of its data root, every POLL_S: microseconds) and asks when the disk has
lost more than what is left of the limit since the last answer (the layer may be over it: at once,
whatever a measurement costs), or GATE bytes, or SLOW_S have passed (these two at most a fifth of the
time: a layer of many files takes long to walk); on a remote daemon every SLOW_S / 4, at most a fifth
of the time. The first rule bounds how far a fast writer gets past the limit by what it writes in a
poll and a measurement, however slow the machine (a 2-core machine under load once let `dd` reach
769 MB of a 256 MB limit when the measurements themselves set the pace).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from horizon.eval.sandbox.docker.image import sdk_errors

log = logging.getLogger("horizon.eval.sandbox.docker")
POLL_S = 0.05
SLOW_S = 4.0
GATE = 64 << 20  # the daemon's disk losing this much since the last measurement: measure the layer soon
FLOOR = 8 << 20  # near the limit, a measurement per this much of the disk lost at most
_enforced: dict[str, bool] = {}  # daemon -> whether storage_opt size is honoured


def size_option(client, storage_mb: int) -> dict:
    """The storage_opt to ask for (empty where this daemon is known not to honour it)."""
    if _enforced.get(str(client.api.base_url)) is False:
        return {}
    return {"storage_opt": {"size": f"{int(storage_mb)}M"}}


def refused(client, error: Exception) -> bool:
    """Whether a container start failed only because the driver cannot limit the layer (remembered)."""
    text = str(error)
    if "storage-opt" in text or "storage_opt" in text:
        _enforced[str(client.api.base_url)] = False
        log.info("the Docker daemon's storage driver cannot limit a container's size: storage_mb is watched")
        return True
    return False


def accepted(client) -> None:
    _enforced.setdefault(str(client.api.base_url), True)


_roots: dict[str, str | None] = {}


def local_data_root(client) -> str | None:
    """The daemon's data root when it is a directory of this host (a local daemon), else None."""
    key = str(client.api.base_url)
    if key not in _roots:
        daemon, _ = sdk_errors()
        try:
            root = client.info().get("DockerRootDir")
        except daemon:
            root = None
        local = key.startswith("http+docker://") or "unix" in key
        _roots[key] = root if local and root and os.path.isdir(root) else None
    return _roots[key]


def layer_size(client, container_id: str) -> int | None:
    """Bytes of the container's writable layer, as the daemon measures it (None: it cannot say)."""
    daemon, _ = sdk_errors()
    try:
        found = client.api.containers(all=True, size=True, filters={"id": container_id})
    except daemon:
        return None
    return int(found[0].get("SizeRw") or 0) if found else None


def upper_dir(container) -> str | None:
    """The container's writable layer as a directory of this host (overlay's UpperDir), else None."""
    data = (container.attrs.get("GraphDriver") or {}).get("Data") or {}
    upper = data.get("UpperDir")
    return upper if upper and os.path.isdir(upper) else None


def tree_bytes(root: str) -> int | None:
    """The files' apparent sizes under `root`, links not followed (what SizeRw counts); None: unreadable."""
    total, stack = 0, [root]
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            if d == root:
                return None
            continue  # removed while walking
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                else:
                    total += e.stat(follow_symlinks=False).st_size
            except OSError:
                continue
    return total


def due(lost: int | None, left: int, since: float, cost: float) -> bool:
    """Whether to measure the layer now: `lost` bytes of the daemon's disk since the last measurement
    (None: not readable here), `left` bytes of the limit past the last size measured, `since` and
    `cost` seconds since the last measurement and that measurement's own time."""
    if lost is not None and lost >= max(left, FLOOR):
        return True  # the layer may be over the limit
    if since < 5 * cost:
        return False  # the daemon walks a layer at most a fifth of the time
    if lost is None:
        return since >= SLOW_S / 4
    return lost >= GATE or since >= SLOW_S


class StorageWatch:
    """Polls the layer's size; `on_exceed(size)` once when it is over `limit` bytes; `peak` the largest seen."""

    def __init__(
        self,
        client,
        container_id: str,
        limit: int,
        on_exceed: Callable[[int], None],
        disk: str | None = None,
        upper: str | None = None,
    ):
        self.client, self.id, self.limit, self.on_exceed = client, container_id, limit, on_exceed
        self.disk = disk  # the daemon's data root, where it is on this host
        self.upper = upper  # the layer's own directory, where it is on this host
        self.peak = 0
        self.fired = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"storage-{container_id[:12]}", daemon=True)

    def start(self) -> StorageWatch:
        self._thread.start()
        return self

    def _free(self) -> int | None:
        try:
            st = os.statvfs(self.disk)
            return st.f_bavail * st.f_frsize
        except (OSError, TypeError):
            return None

    def _run(self) -> None:
        last_free, last_time, cost, last_size = self._free(), 0.0, 0.0, 0
        while not self._stop.wait(POLL_S if self.disk else SLOW_S / 4):
            free, now = self._free(), time.monotonic()
            lost = None if free is None or last_free is None else last_free - free
            if not due(lost, self.limit - last_size, now - last_time, cost):
                continue
            size = self.measure()
            last_free, last_time, cost = free, now, time.monotonic() - now
            if size is None:
                continue
            last_size, self.peak = size, max(self.peak, size)
            if size > self.limit and not self.fired:
                self.fired = True
                self.on_exceed(size)
                return

    def measure(self) -> int | None:
        """The layer's bytes: its directory walked where it is here, else the daemon's answer."""
        size = tree_bytes(self.upper) if self.upper else None
        return size if size is not None else layer_size(self.client, self.id)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
