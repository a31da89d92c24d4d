"""Running one host-side command whose output comes from inside a sandbox: bounded in size and time.

What a sandboxed command prints is the agent's to choose: it is read through pipes, keeping the
first and last `cap` bytes of each stream and discarding the middle (never buffered unbounded),
and a command that outlives its deadline is killed. Background processes that keep the pipes open
after the command exits are not waited for beyond a short grace.
"""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass

GRACE = 1.0  # seconds to drain pipes still held open by background processes after the command exits


class Capped:
    """Drain a pipe completely in a thread, keeping its first and last `cap` bytes."""

    def __init__(self, pipe, cap: int):
        self.head, self.tail, self.dropped, self.cap = bytearray(), bytearray(), 0, cap
        self.pipe = pipe
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self) -> None:
        try:
            while chunk := self.pipe.read1(65536):
                room = self.cap - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail += chunk
                    if len(self.tail) > self.cap:
                        self.dropped += len(self.tail) - self.cap
                        del self.tail[: len(self.tail) - self.cap]
        except (OSError, ValueError):
            pass

    def value(self, wait: float) -> bytes:
        self.t.join(timeout=wait)
        if self.dropped:
            return bytes(self.head) + b"\n[... %d bytes omitted ...]\n" % self.dropped + bytes(self.tail)
        return bytes(self.head) + bytes(self.tail)


@dataclass
class HostResult:
    rc: int
    stdout: bytes
    stderr: bytes
    killed: bool  # the host deadline passed and the command was killed


def run_capped(argv: list[str], env: dict, cap: int, deadline: float | None = None,
               input: bytes | None = None, pass_fds: tuple = ()) -> HostResult:  # fmt: skip
    """Run argv (a clean, explicit environment; cwd /) and read what it prints, bounded."""
    p = subprocess.Popen(
        argv, env=env, cwd="/", pass_fds=pass_fds, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
    )  # fmt: skip
    out, err = Capped(p.stdout, cap), Capped(p.stderr, cap)
    if input is not None:
        threading.Thread(target=_feed, args=(p.stdin, input), daemon=True).start()
    killed = False
    try:
        p.wait(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        killed = True
        p.kill()
        p.wait()
    # a pipe still held by a background process is left to its reader thread (a daemon), not closed
    # under it: the thread ends when that process does, at the latest when the sandbox is torn down
    return HostResult(p.returncode, out.value(GRACE), err.value(0.1), killed)


def _feed(pipe, data: bytes) -> None:
    try:
        pipe.write(data)
    except OSError:  # the command exited without reading everything
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass
