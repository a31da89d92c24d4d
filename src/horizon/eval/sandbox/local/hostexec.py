"""Running one host-side command whose output comes from inside a sandbox: bounded in size and time.

What a sandboxed command prints is the agent's to choose: it is read through pipes, keeping the
first and last `cap` bytes of each stream and discarding the middle (never buffered unbounded),
and a command that outlives its deadline is killed. Background processes that keep the pipes open
after the command exits are not waited for beyond a short grace.
"""

from __future__ import annotations

import array
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from horizon.eval.sandbox import SandboxError

GRACE = 1.0  # seconds to drain pipes still held open by background processes after the command exits
STALL = 1.0  # seconds pid 1 may take to say it started a command before the host looks why (it takes ms)


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


def run_capped(
    argv: list[str],
    env: dict,
    cap: int,
    deadline: float | None = None,
    input: bytes | None = None,
    pass_fds: tuple = (),
) -> HostResult:
    """Run argv (a clean, explicit environment; cwd /) and read what it prints, bounded. At the deadline
    its whole process group is killed: what it started inside a sandbox too (from the host, across
    the pid namespace), except what left the group (a daemon such as tmux's server)."""
    p = subprocess.Popen(
        argv,
        env=env,
        cwd="/",
        pass_fds=pass_fds,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        start_new_session=True,
    )
    out, err = Capped(p.stdout, cap), Capped(p.stderr, cap)
    if input is not None:
        threading.Thread(target=_feed, args=(p.stdin, input), daemon=True).start()
    killed = False
    try:
        p.wait(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        killed = True
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
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


class InitTimeout(SandboxError):
    pass


class InitChannel:
    """The host's end of the socket inherited by the local sandbox's pid 1 (programs/init.py): one command at a time.

    Each command's stdin, stdout and stderr are pipes made here and passed along (SCM_RIGHTS): what it
    prints never travels through the channel, which only carries the init's numbers (a pid, an exit
    status). A silent, closed or garbled channel is a SandboxError for that sandbox.
    """

    def __init__(self, sock: socket.socket, name: str, unstick: Callable[[], object] | None = None):
        self.sock, self.name, self.lock = sock, name, threading.Lock()
        self.unstick = unstick  # what frees pid 1 when a command's start is late (LocalSandbox's)
        self.via: str | None = None  # how pid 1 started the last command: "spawn" or "fork"
        self.asked = 0  # the id of the last request pid 1 answers itself

    def send(self, obj: dict, fds: list[int] = ()) -> None:
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        try:
            self.sock.sendmsg([json.dumps(obj).encode()], anc)
        except OSError as e:
            raise SandboxError(f"{self.name}: the sandbox's init does not take requests ({e})") from None

    def recv(
        self, key: str, deadline: float | None, pid: int | None = None, ident: int | None = None
    ) -> dict:
        """The next message holding `key` (for `pid`; answering request `ident`); others (a late exit of a
        killed command, the late answer to a request that timed out) are dropped."""
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise InitTimeout(f"{self.name}: the sandbox's init did not answer in time")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                raise InitTimeout(f"{self.name}: the sandbox's init did not answer in time") from None
            except OSError as e:
                raise SandboxError(f"{self.name}: the sandbox's init is unreachable ({e})") from None
            if not data:
                raise SandboxError(f"{self.name}: the sandbox's init is gone")
            try:
                msg = json.loads(data)
            except ValueError:
                msg = None
            if not isinstance(msg, dict):
                raise SandboxError(
                    f"{self.name}: a malformed message from the sandbox's init: {data[:100]!r}"
                )
            if msg.get("id") != ident:  # an answer to another request (or to none: a command's messages)
                continue
            if (key in msg or "error" in msg) and (pid is None or msg.get(key) == pid):
                return msg

    def run(
        self, argv: list[str], env: dict, cwd: str, input: bytes | None, cap: int, timeout: float | None
    ) -> HostResult:
        with self.lock:
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            in_r, in_w = os.pipe() if input is not None else (os.open(os.devnull, os.O_RDONLY), None)
            try:
                self.send({"op": "exec", "argv": argv, "env": env, "cwd": cwd}, [in_r, out_w, err_w])
            finally:
                for fd in (in_r, out_w, err_w):
                    os.close(fd)
            out, err = Capped(os.fdopen(out_r, "rb"), cap), Capped(os.fdopen(err_r, "rb"), cap)
            if in_w is not None:
                threading.Thread(target=_feed, args=(os.fdopen(in_w, "wb"), input), daemon=True).start()
            started = self._started(time.monotonic() + 30)
            if "pid" not in started:  # it could not fork: the sandbox is out of processes or memory
                raise SandboxError(f"{self.name}: {argv[0]} could not start: {started['error']}")
            pid, killed = started["pid"], False
            self.via = started.get("via")  # how pid 1 started it (tests read it)
            try:
                done = self.recv("exit", None if timeout is None else time.monotonic() + timeout, pid)
            except InitTimeout:
                self.send({"op": "kill", "pid": pid})  # its whole process group, like a shell's job
                killed, done = True, self.recv("exit", time.monotonic() + 10, pid)
            return HostResult(done["status"], out.value(GRACE), err.value(0.1), killed)

    def _started(self, deadline: float) -> dict:
        """pid 1's answer to an exec. pid 1 waits inside posix_spawn until the new child has run its
        program, so a child stopped before that (the agent's `kill -STOP -1`: SIGSTOP cannot be blocked)
        would hold pid 1; while the answer is late, `unstick` releases such a child from the host."""
        while True:
            try:
                return self.recv("pid", min(deadline, time.monotonic() + STALL))
            except InitTimeout:
                if time.monotonic() >= deadline:
                    raise
                if self.unstick is not None:
                    self.unstick()

    def call(self, op: str, timeout: float, **args) -> bool:
        """A request the init answers itself (settle, killall): its `done`."""
        return bool(self.ask(op, "done", timeout, **args)["done"])

    def ask(self, op: str, key: str, timeout: float, **args) -> dict:
        """A request the init answers itself: its answer, the message holding `key` (an `error` is a
        SandboxError). Each request has an id its answer repeats, so an answer that came too late for
        its own request is never taken for the next one's."""
        with self.lock:
            self.asked += 1
            self.send({"op": op, "id": self.asked, **args})
            got = self.recv(key, time.monotonic() + timeout, ident=self.asked)
        if key not in got:
            raise SandboxError(f"{self.name}: the sandbox's init refused {op}: {str(got.get('error'))[:200]}")
        return got

    def close(self) -> None:
        self.sock.close()
