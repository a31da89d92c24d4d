"""The `local` sandbox: bubblewrap, no daemon, no image.

Inside: the host's system directories read-only (/usr, /etc, /bin, /lib...), a private fresh
/app holding the task's files, /tests and /logs for the graders, tmpfs /tmp and /root, the
offline grader toolchain at /opt/horizon, no network, its own pid/ipc/uts namespaces, no
capabilities, and rlimits on processes, memory, CPU time and file size. Nothing else of the host
is visible (not the repository, the tasks' tests and solutions, or the results).

As root, each sandbox runs under its own unprivileged uid (200000 + n, allocated with a lock
file), so that RLIMIT_NPROC caps a fork bomb to that sandbox (the kernel never enforces it for
uid 0); the uid appears as root inside (user namespace). As an ordinary user the sandbox runs
under that user's uid.

Its first process is a small control server (server.py) that runs each `exec` inside the
sandbox. The bwrap process is our child with --die-with-parent: stop() kills it and with it the
whole pid namespace, and a killed job takes its sandboxes with it.
"""

from __future__ import annotations

import base64
import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from horizon.eval.sandbox import ExecResult, Sandbox, SandboxError, SandboxSpec

log = logging.getLogger("horizon.eval.sandbox")

SYSTEM_DIRS = ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
UID_BASE, UID_COUNT = 200000, 4096
LOCK_DIR = Path(tempfile.gettempdir()) / "horizon-sandbox-uids"
SERVER = Path(__file__).with_name("server.py")
BOUND = {"/app": "app", "/tests": "tests", "/logs": "logs"}
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def bwrap_path() -> str:
    path = shutil.which("bwrap")
    if not path:
        raise SandboxError(
            "the local sandbox needs bubblewrap: install it (Debian: apt-get install bubblewrap)"
        )
    return path


class _UidLease:
    """An unprivileged uid for one sandbox, held by an flock (released when the process dies)."""

    def __init__(self):
        LOCK_DIR.mkdir(mode=0o755, exist_ok=True)
        start = (os.getpid() * 7919) % UID_COUNT  # spread concurrent jobs over the range
        for i in range(UID_COUNT):
            uid = UID_BASE + (start + i) % UID_COUNT
            fh = open(LOCK_DIR / f"{uid}.lock", "w")
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.close()
                continue
            self.uid, self._fh = uid, fh
            return
        raise SandboxError(f"no free sandbox uid in {UID_BASE}..{UID_BASE + UID_COUNT - 1}")

    def release(self) -> None:
        try:
            fcntl.flock(self._fh, fcntl.LOCK_UN)
        finally:
            self._fh.close()


def _server_python() -> tuple[str, list[str]]:
    """(interpreter, extra read-only binds) for the control server inside the sandbox."""
    for p in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(p):
            return p, []
    import sys

    prefix = os.path.realpath(sys.base_prefix)
    return os.path.realpath(sys.executable), [prefix]


FIXED_MTIME = 1767225600  # 2026-01-01T00:00:00Z: `ls -l` of a task's files reads the same in every run


def set_mtimes(root: Path, when: int = FIXED_MTIME) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for n in filenames + dirnames:
            os.utime(os.path.join(dirpath, n), (when, when), follow_symlinks=False)
    os.utime(root, (when, when))


def _world_readable(path: Path) -> bool:
    """Can any user reach and read `path` (o+x on every parent, o+rx on it)?"""
    p = Path(path).resolve()
    if not os.stat(p).st_mode & 0o005 == 0o005:
        return False
    return all(os.stat(q).st_mode & 0o001 for q in p.parents)


def _user_processes(uid: int) -> int:
    n = 0
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.stat(f"/proc/{d}").st_uid == uid:
                    n += 1
            except OSError:
                pass
    return n


class LocalSandbox(Sandbox):
    def __init__(self, spec: SandboxSpec, toolchain: str | Path | None = None, hostname: str = "box"):
        self.spec = spec
        self.toolchain = Path(toolchain) if toolchain else None
        self.hostname = hostname
        self.proc: subprocess.Popen | None = None
        self.root: Path | None = None
        self.lease: _UidLease | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        bwrap = bwrap_path()
        tools = self._prepare_root()
        as_root = os.geteuid() == 0
        if as_root:
            self.lease = _UidLease()
            self.uid = self.lease.uid
            self._chown(self.root)
            nproc = self.spec.max_processes
        else:
            self.uid = os.getuid()
            nproc = _user_processes(self.uid) + self.spec.max_processes
        limits = {"nproc": nproc, "as": self.spec.memory_mb << 20, "cpu": self.spec.cpu_seconds,
                  "fsize": self.spec.max_file_mb << 20, "core": 0}  # fmt: skip
        argv = self._bwrap_argv(bwrap, tools, limits)
        if as_root:
            argv = ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups", *argv]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self._wait_ready(self.root / "ctl" / "ctl.sock")

    def _prepare_root(self) -> Path | None:
        """The sandbox's own directory: /app's files, the control server, the toolchain where it is readable."""
        self.root = Path(tempfile.mkdtemp(prefix=f"horizon-{self.spec.name[:40]}-"))
        for d in (*BOUND.values(), "ctl"):
            (self.root / d).mkdir()
        # the unprivileged sandbox user must reach every bind source: copy what lives behind a
        # private directory (a 0700 home, pytest's tmp) into the sandbox's own directory
        shutil.copy(SERVER, self.root / "ctl" / "server.py")
        tools = self.toolchain
        if tools is not None and not _world_readable(tools):
            shutil.copytree(tools, self.root / "tools", symlinks=True)
            tools = self.root / "tools"
        if self.spec.workdir_files:
            shutil.copytree(self.spec.workdir_files, self.root / "app", dirs_exist_ok=True, symlinks=True)
            set_mtimes(self.root / "app")
        return tools

    def _bwrap_argv(self, bwrap: str, tools: Path | None, limits: dict) -> list[str]:
        py, extra = _server_python()
        argv = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        if self.spec.allow_internet:
            argv.append("--share-net")
        for name in SYSTEM_DIRS:
            p = Path("/") / name
            if p.is_symlink():
                argv += ["--symlink", os.readlink(p), str(p)]
            elif p.is_dir():
                argv += ["--ro-bind", str(p), str(p)]
        for path in extra:
            argv += ["--ro-bind", path, path]
        argv += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/root", "--tmpfs", "/run",
                 "--dir", "/var/tmp"]  # fmt: skip
        for inside, host in BOUND.items():
            argv += ["--bind", str(self.root / host), inside]
        argv += ["--bind", str(self.root / "ctl"), "/run/horizon"]
        argv += ["--ro-bind", str(self.root / "ctl" / "server.py"), "/run/horizon-server.py"]
        if tools is not None:
            argv += ["--ro-bind", str(tools), "/opt/horizon"]
        return [*argv, "--uid", "0", "--gid", "0", "--hostname", self.hostname, "--chdir", "/app",
                "--clearenv", "--setenv", "PATH", PATH, "--setenv", "HOME", "/root", "--setenv", "LANG", "C.UTF-8",
                "--", py, "-I", "-S", "/run/horizon-server.py", "/run/horizon/ctl.sock", json.dumps(limits)]  # fmt: skip

    def _wait_ready(self, sock: Path, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while not sock.exists():
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                rc = self.proc.returncode
                self.stop()
                raise SandboxError(f"{self.spec.name}: bubblewrap exited ({rc}): {err.strip()[-800:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise SandboxError(f"{self.spec.name}: the sandbox did not come up within {timeout:.0f} s")
            time.sleep(0.005)
        self._sock = str(sock)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)  # --die-with-parent: the pid namespace goes with it
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log.error("%s: bubblewrap did not exit after SIGKILL", self.spec.name)
        if self.lease is not None:
            subprocess.run(
                ["pkill", "-KILL", "-u", str(self.lease.uid)], capture_output=True
            )  # belt and braces
            self.lease.release()
            self.lease = None
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
        if self.proc is not None and self.proc.stderr:
            self.proc.stderr.close()
        self.proc = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- operations -----------------------------------------------------------------------------

    def exec(self, argv, timeout=None, env=None, cwd="/app", input=None, max_bytes=1 << 20) -> ExecResult:
        if not self.alive():
            raise SandboxError(f"{self.spec.name}: the sandbox is not running")
        if isinstance(argv, str):
            argv = ["bash", "-c", argv]
        full_env = {"PATH": PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "xterm-256color", **(env or {})}
        req = {
            "argv": argv,
            "timeout": timeout,
            "env": full_env,
            "cwd": cwd,
            "max_bytes": max_bytes,
            "input": base64.b64encode(input).decode() if input is not None else None,
        }
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(None if timeout is None else timeout + 30)
        try:
            s.connect(self._sock)
            s.sendall(json.dumps(req).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                data += chunk
        except OSError as e:
            raise SandboxError(f"{self.spec.name}: lost the control connection ({e})") from None
        finally:
            s.close()
        if not data:
            raise SandboxError(
                f"{self.spec.name}: the control server closed the connection (sandbox killed?)"
            )
        rep = json.loads(data)
        dec = lambda b: base64.b64decode(b).decode("utf-8", errors="replace")  # noqa: E731
        return ExecResult(rep["rc"], dec(rep["stdout"]), dec(rep["stderr"]), rep["timed_out"])

    def put(self, src: Path, dest: str) -> None:
        for inside, host in BOUND.items():
            if dest == inside or dest.startswith(inside + "/"):
                target = self.root / host / dest[len(inside) :].lstrip("/")
                if Path(src).is_dir():
                    shutil.copytree(src, target, dirs_exist_ok=True, symlinks=True)
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, target)
                if self.lease is not None:
                    self._chown(self.root / host)
                return
        super().put(src, dest)

    def _chown(self, path: Path) -> None:
        uid = self.lease.uid
        os.chown(path, uid, uid)
        for dirpath, dirnames, filenames in os.walk(path):
            for n in dirnames + filenames:
                try:
                    os.chown(os.path.join(dirpath, n), uid, uid, follow_symlinks=False)
                except OSError:
                    pass
