"""Sandboxes: one small protocol (start, exec, put, get, stop) and its backends.

- `local`: bubblewrap (host system read-only, a private fresh /app, no network, own pid
  namespace, resource limits); the embedded default, no daemon needed.
- `docker`: the Docker SDK (honours DOCKER_HOST); builds the task's Dockerfile or uses its image.
- `apptainer`: `apptainer instance` on clusters.

The agent loop and the graders only use this protocol, so a backend slots in without touching
them. Every sandbox is torn down by stop(), also when the job is killed (see each backend).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from horizon.io import tar_bytes


class SandboxError(RuntimeError):
    """The sandbox itself failed (an infrastructure error, not the agent's)."""


@dataclass
class ExecResult:
    rc: int
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out


@dataclass
class SandboxSpec:
    """What a sandbox needs from a task and from the run."""

    name: str  # unique per attempt (used in labels and paths)
    workdir_files: Path | None = None  # copied into /app at start
    image: str | None = None  # docker / apptainer image, if the task has one
    dockerfile_dir: Path | None = None  # a build context holding a Dockerfile
    cpus: float = 1.0
    memory_mb: int = 2048
    max_processes: int = 256
    max_file_mb: int = 1024
    cpu_seconds: int = 3600
    allow_internet: bool = False
    labels: dict = field(default_factory=dict)


class Sandbox:
    """The protocol. Paths inside the sandbox are POSIX strings; /app is the working directory."""

    spec: SandboxSpec

    def start(self) -> None:
        raise NotImplementedError

    def exec(
        self,
        argv: list[str] | str,
        timeout: float | None = None,
        env: dict | None = None,
        cwd: str = "/app",
        input: bytes | None = None,
        max_bytes: int = 1 << 20,
    ) -> ExecResult:
        raise NotImplementedError

    def put(self, src: Path, dest: str) -> None:
        """Copy a host file or directory to `dest` inside the sandbox (dest = the new path)."""
        self.exec(["mkdir", "-p", dest.rsplit("/", 1)[0] or "/"], timeout=30)
        r = self.exec(
            ["tar", "-x", "-C", dest.rsplit("/", 1)[0] or "/"],
            input=tar_bytes(src, dest.rsplit("/", 1)[1]),
            timeout=120,
        )
        if not r.ok:
            raise SandboxError(f"{self.spec.name}: copying {src} to {dest} failed: {r.stderr[-500:]}")

    def get(self, src: str, dest: Path) -> bool:
        """Copy a file from the sandbox to the host; False if it does not exist."""
        r = self.exec(["cat", src], timeout=60, max_bytes=64 << 20)
        if r.rc != 0:
            return False
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        Path(dest).write_text(r.stdout)
        return True

    def stop(self) -> None:
        raise NotImplementedError

    @classmethod
    def sweep(cls, run_id: str) -> int:
        """Remove what a killed earlier run of the same job left behind; the count removed."""
        return 0

    def alive(self) -> bool:
        """Is the sandbox itself still up (even if what runs inside is in trouble)?"""
        raise NotImplementedError

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


BACKENDS = {
    "local": ("horizon.eval.sandbox.local", "LocalSandbox"),
    "docker": ("horizon.eval.sandbox.docker", "DockerSandbox"),
    "apptainer": ("horizon.eval.sandbox.apptainer", "ApptainerSandbox"),
}


def sandbox_class(kind: str) -> type[Sandbox]:
    """The backend class of `eval.sandbox` (imported only when used: docker needs its SDK)."""
    import importlib

    if kind not in BACKENDS:
        raise ValueError(f"unknown sandbox {kind!r} (allowed: {', '.join(BACKENDS)})")
    module, name = BACKENDS[kind]
    return getattr(importlib.import_module(module), name)


def make_sandbox(kind: str, spec: SandboxSpec, **options) -> Sandbox:
    return sandbox_class(kind)(spec, **options)


def sweep_run(kind: str, run_id: str) -> int:
    """Before a job starts: remove the sandboxes a killed earlier run of this job left behind."""
    return sandbox_class(kind).sweep(run_id)
