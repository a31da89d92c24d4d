"""The task's storage_mb under docker: enforced where the storage driver can, watched everywhere.

Docker limits a container's writable layer (`storage_opt={"size": ...}`) only on overlay2 over xfs
mounted with pquota, devicemapper, btrfs and zfs; whether this daemon can is learnt from its answer
to the first container that asks (once per daemon and process). Everywhere, a thread polls the
layer's size through the daemon's API (`SizeRw`, what `docker ps -s` shows) while the attempt runs;
over the limit it calls `on_exceed` once (the sandbox then stops the container: the writer ends at
once, and the attempt is the agent's `sandbox_exhausted`). The interval is short (POLL_S) and grows
with the cost of a poll (a layer of many files takes the daemon longer to measure).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from horizon.eval.sandbox.docker.image import sdk_errors

log = logging.getLogger("horizon.eval.sandbox.docker")
POLL_S = 0.25
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


def layer_size(client, container_id: str) -> int | None:
    """Bytes of the container's writable layer, as the daemon measures it (None: it cannot say)."""
    daemon, _ = sdk_errors()
    try:
        found = client.api.containers(all=True, size=True, filters={"id": container_id})
    except daemon:
        return None
    return int(found[0].get("SizeRw") or 0) if found else None


class StorageWatch:
    """Polls the layer's size; `on_exceed(size)` once when it is over `limit` bytes; `peak` the largest seen."""

    def __init__(self, client, container_id: str, limit: int, on_exceed: Callable[[int], None]):
        self.client, self.id, self.limit, self.on_exceed = client, container_id, limit, on_exceed
        self.peak = 0
        self.fired = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"storage-{container_id[:12]}", daemon=True)

    def start(self) -> StorageWatch:
        self._thread.start()
        return self

    def _run(self) -> None:
        interval = POLL_S
        while not self._stop.wait(interval):
            t = time.monotonic()
            size = layer_size(self.client, self.id)
            interval = max(POLL_S, 5 * (time.monotonic() - t))  # never more than a fifth of the time
            if size is None:
                continue
            self.peak = max(self.peak, size)
            if size > self.limit and not self.fired:
                self.fired = True
                self.on_exceed(size)
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
