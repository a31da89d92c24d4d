"""Control server that runs INSIDE a sandbox (stdlib only, any python3 >= 3.8).

The sandbox's first process. It listens on a unix socket in a bind-mounted control directory and
runs each request (one JSON line: argv, timeout, env, cwd, input) as a child in its own process
group, so that every `exec` shares the sandbox's namespaces, limits and processes, as
`docker exec` does. Output is kept up to `max_bytes` per stream (head and tail), never unbounded.
"""

import base64
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading

MAX_BYTES = 1 << 20


def apply_limits(limits):
    for name, value in limits.items():
        res = getattr(resource, "RLIMIT_" + name.upper())
        resource.setrlimit(res, (value, value))


class Capped:
    """Drain a pipe completely, keeping its first and last `cap` bytes."""

    def __init__(self, pipe, cap):
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self.cap = cap
        self.t = threading.Thread(target=self._run, args=(pipe,), daemon=True)
        self.t.start()

    def _run(self, pipe):
        while True:
            chunk = pipe.read1(65536) if hasattr(pipe, "read1") else pipe.read(65536)
            if not chunk:
                break
            room = self.cap - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                if len(self.tail) > self.cap:
                    self.dropped += len(self.tail) - self.cap
                    del self.tail[: len(self.tail) - self.cap]

    def value(self):
        self.t.join(timeout=5)
        if self.dropped:
            return bytes(self.head) + b"\n[... %d bytes omitted ...]\n" % self.dropped + bytes(self.tail)
        return bytes(self.head) + bytes(self.tail)


def handle(conn):
    with conn:
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(1 << 16)
            if not chunk:
                return
            data += chunk
        req = json.loads(data)
        if req.get("ping"):
            conn.sendall(b'{"pong": true}\n')
            return
        env = req.get("env") or {}
        stdin = base64.b64decode(req["input"]) if req.get("input") is not None else None
        try:
            p = subprocess.Popen(
                req["argv"],
                cwd=req.get("cwd") or "/",
                env=env,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as e:
            reply = {
                "rc": 127,
                "stdout": "",
                "stderr": base64.b64encode(str(e).encode()).decode(),
                "timed_out": False,
            }
            conn.sendall(json.dumps(reply).encode() + b"\n")
            return
        cap = int(req.get("max_bytes") or MAX_BYTES)
        out, err = Capped(p.stdout, cap), Capped(p.stderr, cap)
        if stdin is not None:
            try:
                p.stdin.write(stdin)
                p.stdin.close()
            except OSError:
                pass
        timed_out = False
        try:
            p.wait(timeout=req.get("timeout"))
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait()
        reply = {
            "rc": p.returncode,
            "stdout": base64.b64encode(out.value()).decode(),
            "stderr": base64.b64encode(err.value()).decode(),
            "timed_out": timed_out,
        }
        try:
            conn.sendall(json.dumps(reply).encode() + b"\n")
        except OSError:
            pass


def main():
    sock_path, limits = sys.argv[1], json.loads(sys.argv[2])
    apply_limits(limits)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(sock_path):
        os.unlink(sock_path)
    srv.bind(sock_path + ".tmp")
    srv.listen(64)
    os.rename(sock_path + ".tmp", sock_path)  # appears only once it accepts connections
    while True:
        conn, _ = srv.accept()
        try:
            threading.Thread(target=handle, args=(conn,), daemon=True).start()
        except RuntimeError:  # no thread left (a fork bomb holds every process slot): answer inline
            try:
                handle(conn)
            except Exception:  # noqa: BLE001 - keep serving
                pass


if __name__ == "__main__":
    main()
