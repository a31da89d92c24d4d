"""The storage watch of the docker sandbox without a daemon: when it measures a container's layer, and
how far a fast writer gets past storage_mb when each measurement is slow (a loaded machine)."""

import threading
import time

from horizon.eval.sandbox.docker import storage
from horizon.eval.sandbox.docker.storage import FLOOR, GATE, SLOW_S, due

MB = 1 << 20


def test_a_measurement_is_due_at_once_when_the_disk_lost_what_is_left_of_the_limit():
    slow = 1.0  # the last measurement took a second: the next one waits five, unless the layer may be over
    assert due(lost=100 * MB, left=100 * MB, since=0.1, cost=slow)
    assert not due(lost=99 * MB, left=100 * MB, since=0.1, cost=slow)
    assert due(lost=FLOOR, left=1, since=0.1, cost=slow) and not due(
        lost=FLOOR - 1, left=1, since=0.1, cost=slow
    )
    assert not due(lost=GATE, left=1 << 40, since=4.9, cost=slow)  # the gate waits for a fifth of the time
    assert due(lost=GATE, left=1 << 40, since=5.0, cost=slow)
    assert not due(lost=GATE - 1, left=1 << 40, since=SLOW_S - 0.01, cost=0.0)
    assert due(lost=0, left=1 << 40, since=SLOW_S, cost=0.0)  # and the clock
    assert not due(lost=None, left=0, since=SLOW_S / 4 - 0.01, cost=0.0)  # a remote daemon: the clock only
    assert due(lost=None, left=0, since=SLOW_S / 4, cost=0.0)


def test_a_fast_writer_is_caught_within_a_poll_and_a_measurement_of_the_limit(monkeypatch):
    """A writer at 500 MB/s from 0.6 s on, each measurement 0.3 s: the watch measures once the disk lost
    what was left of the 256 MB (about 1.1 s), and sees ~425 MB. Measurements paced by their own cost
    (one every 5 x 0.3 s, as before) saw the layer first at ~875 MB."""
    rate, start, cost, limit = 500 * MB, 0.6, 0.3, 256 * MB
    t0 = time.monotonic()

    def written() -> int:
        return int(max(0.0, time.monotonic() - t0 - start) * rate)

    def slow_size(client, container_id):
        time.sleep(cost)
        return written()

    class Watch(storage.StorageWatch):
        def _free(self):
            return (1 << 40) - written()

    monkeypatch.setattr(storage, "layer_size", slow_size)
    caught, done = [], threading.Event()
    watch = Watch(None, "c" * 64, limit, lambda size: (caught.append(size), done.set()), disk="/")
    watch.start()
    try:
        assert done.wait(10), "the watch never saw the layer over its limit"
    finally:
        watch.stop()
    assert limit < caught[0] < 650 * MB, caught[0] / MB


def test_a_local_layer_is_measured_from_its_directory_without_asking_the_daemon(tmp_path):
    """The upper directory walked (milliseconds) instead of the API's SizeRw, whose latency let a fast
    writer run 350 MB past the limit under podman; links are not followed, as SizeRw does not."""
    upper = tmp_path / "upper"
    (upper / "tmp" / "deep").mkdir(parents=True)
    (upper / "tmp" / "fill").write_bytes(b"x" * 3000)
    (upper / "tmp" / "deep" / "more").write_bytes(b"y" * 500)
    outside = tmp_path / "big"
    outside.write_bytes(b"z" * 100_000)
    (upper / "tmp" / "link").symlink_to(outside)
    link_size = (upper / "tmp" / "link").lstat().st_size
    assert storage.tree_bytes(str(upper)) == 3500 + link_size
    assert storage.tree_bytes(str(tmp_path / "gone")) is None
    watch = storage.StorageWatch(None, "c" * 64, 1 << 20, lambda size: None, upper=str(upper))
    assert watch.measure() == 3500 + link_size  # no client: the daemon is never asked
