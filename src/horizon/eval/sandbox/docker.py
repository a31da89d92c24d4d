"""The `docker` sandbox: one container per attempt, through the Docker SDK (honours DOCKER_HOST).

Image: the task's prebuilt `docker_image`, or its Dockerfile built once per content hash (the tag
`horizon-task:<sha>` is the cache: a rebuild happens only when the build context or the base
image name changes; Dockerfiles may start `ARG BASE_IMAGE` / `FROM ${BASE_IMAGE}`, our bundled
tasks do). Limits from the task (cpus, memory) and the run (processes); `network_mode=none`
unless the task allows internet. Every container carries labels (horizon.run, horizon.task,
horizon.attempt, horizon.repeat) and is removed on stop(); the rollout job removes the containers
of its own run left by a killed earlier run when it starts (`sweep`), and its SIGTERM/SIGINT
handler stops the live ones.

tmux must be in the image (the Terminal-Bench base images and our base image have it). The
graders' toolchain (pytest, uv stand-in) is copied into each container at /opt/horizon with
put_archive, which also works with a remote daemon (a bind mount would not).
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import tarfile
import threading
import time
from pathlib import Path

from horizon.eval.sandbox import ExecResult, Sandbox, SandboxError, SandboxSpec
from horizon.io import tar_bytes

log = logging.getLogger("horizon.eval.sandbox.docker")

LABEL = "horizon.sandbox"
BASE_IMAGE = "horizon-base:bookworm"
_build_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def client():
    try:
        import docker
    except ImportError:
        raise SandboxError("the docker sandbox needs the docker SDK: pip install 'horizon[docker]'") from None
    try:
        c = docker.from_env(timeout=600)
        c.ping()
        return c
    except Exception as e:  # noqa: BLE001 - any connection problem is an infrastructure error
        raise SandboxError(
            f"cannot reach the Docker daemon at {os.environ.get('DOCKER_HOST', 'the default socket')}: {e}"
        ) from None


def context_hash(context: Path, base_image: str) -> str:
    h = hashlib.sha256(base_image.encode())
    for p in sorted(context.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(context)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def ensure_image(c, spec: SandboxSpec, base_image: str) -> str:
    if spec.image and not spec.dockerfile_dir:
        try:
            c.images.get(spec.image)
        except Exception:  # noqa: BLE001
            log.info("pulling %s", spec.image)
            try:
                c.images.pull(spec.image)
            except Exception as e:  # noqa: BLE001
                raise SandboxError(f"image {spec.image} is not present and cannot be pulled: {e}") from None
        return spec.image
    if spec.image:  # a task with both: the prebuilt image wins (Harbor semantics)
        try:
            c.images.get(spec.image)
            return spec.image
        except Exception:  # noqa: BLE001
            pass
    if not spec.dockerfile_dir:
        raise SandboxError(f"{spec.name}: the task has neither docker_image nor a Dockerfile")
    tag = f"horizon-task:{context_hash(spec.dockerfile_dir, base_image)}"
    with _locks_guard:
        lock = _build_locks.setdefault(tag, threading.Lock())
    with lock:
        try:
            c.images.get(tag)
            return tag
        except Exception:  # noqa: BLE001
            pass
        t = time.monotonic()
        try:
            c.images.build(
                path=str(spec.dockerfile_dir),
                tag=tag,
                rm=True,
                forcerm=True,
                buildargs={"BASE_IMAGE": base_image},
                network_mode="none",
            )
        except Exception as e:  # noqa: BLE001
            raise SandboxError(f"building {spec.dockerfile_dir} failed: {e}") from None
        log.info("built %s from %s in %.1f s", tag, spec.dockerfile_dir, time.monotonic() - t)
    return tag


def sweep(run_id: str) -> int:
    """Remove containers of this run left behind by a killed earlier run of the same job."""
    c = client()
    stale = c.containers.list(all=True, filters={"label": [f"{LABEL}=1", f"horizon.run={run_id}"]})
    for ct in stale:
        ct.remove(force=True)
    if stale:
        log.warning("removed %d stale container(s) of run %s", len(stale), run_id)
    return len(stale)


class DockerSandbox(Sandbox):
    def __init__(
        self,
        spec: SandboxSpec,
        toolchain: str | Path | None = None,
        base_image: str = BASE_IMAGE,
        max_processes: int | None = None,
    ):
        self.spec = spec
        self.toolchain = Path(toolchain) if toolchain else None
        self.base_image = base_image
        self.max_processes = max_processes or spec.max_processes
        self.container = None

    def start(self) -> None:
        c = client()
        image = ensure_image(c, self.spec, self.base_image)
        labels = {LABEL: "1", **{k: str(v) for k, v in self.spec.labels.items()}}
        try:
            self.container = c.containers.run(
                image, command=["sleep", "infinity"], detach=True, labels=labels, working_dir="/app",
                network_mode=None if self.spec.allow_internet else "none", hostname="box",
                nano_cpus=int(self.spec.cpus * 1e9), mem_limit=f"{self.spec.memory_mb}m",
                pids_limit=self.max_processes, init=True, environment={"TERM": "xterm-256color"},
            )  # fmt: skip
        except Exception as e:  # noqa: BLE001
            raise SandboxError(f"{self.spec.name}: starting a container of {image} failed: {e}") from None
        self.exec(["mkdir", "-p", "/app", "/tests", "/logs"], timeout=30, cwd="/")
        if self.toolchain is not None:
            self.container.put_archive("/opt", tar_bytes(self.toolchain, "horizon"))
        if self.exec(["sh", "-c", "command -v tmux"], timeout=30, cwd="/").rc != 0:
            self.stop()
            raise SandboxError(f"{self.spec.name}: the image {image} has no tmux (add it to the image)")

    @classmethod
    def sweep(cls, run_id: str) -> int:
        return sweep(run_id)

    def alive(self) -> bool:
        if self.container is None:
            return False
        try:
            self.container.reload()
            return self.container.status == "running"
        except Exception:  # noqa: BLE001
            return False

    def stop(self) -> None:
        if self.container is not None:
            try:
                self.container.remove(force=True)
            except Exception as e:  # noqa: BLE001
                if "No such container" not in str(e) and "404" not in str(e):
                    log.warning("%s: removing the container failed: %s", self.spec.name, e)
            self.container = None

    def exec(self, argv, timeout=None, env=None, cwd="/app", input=None, max_bytes=1 << 20) -> ExecResult:
        if self.container is None:
            raise SandboxError(f"{self.spec.name}: the sandbox is not running")
        if isinstance(argv, str):
            argv = ["bash", "-c", argv]
        if input is not None:
            raise SandboxError("docker exec with input is not supported: use put()")
        cmd = list(argv)
        if timeout is not None:  # coreutils timeout inside the container: the command dies, not just the wait
            cmd = ["timeout", "-k", "2", str(max(1, int(timeout + 0.999))), *cmd]
        api = self.container.client.api
        try:
            ex = api.exec_create(
                self.container.id, cmd, workdir=cwd, environment=env or {}, stdout=True, stderr=True
            )
            stream = api.exec_start(ex["Id"], stream=True, demux=True)
            out, err = bytearray(), bytearray()
            for o, e in stream:
                if o and len(out) < max_bytes:
                    out += o[: max_bytes - len(out)]
                if e and len(err) < max_bytes:
                    err += e[: max_bytes - len(err)]
            rc = api.exec_inspect(ex["Id"])["ExitCode"]
        except Exception as e:  # noqa: BLE001
            raise SandboxError(f"{self.spec.name}: docker exec failed: {e}") from None
        timed_out = timeout is not None and rc in (124, 137)
        return ExecResult(
            rc if rc is not None else -1,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
            timed_out,
        )

    def put(self, src: Path, dest: str) -> None:
        parent, name = dest.rsplit("/", 1)
        parent = parent or "/"
        self.exec(["mkdir", "-p", parent], timeout=30, cwd="/")
        try:
            ok = self.container.put_archive(parent, tar_bytes(Path(src), name))
        except Exception as e:  # noqa: BLE001
            raise SandboxError(f"{self.spec.name}: copying {src} to {dest} failed: {e}") from None
        if not ok:
            raise SandboxError(f"{self.spec.name}: copying {src} to {dest} failed")

    def get(self, src: str, dest: Path) -> bool:
        try:
            stream, _ = self.container.get_archive(src)
        except Exception:  # noqa: BLE001
            return False
        buf = io.BytesIO(b"".join(stream))
        with tarfile.open(fileobj=buf) as tar:
            member = tar.getmembers()[0]
            f = tar.extractfile(member)
            if f is None:
                return False
            Path(dest).parent.mkdir(parents=True, exist_ok=True)
            Path(dest).write_bytes(f.read())
        return True


def build_base_image(
    tag: str = BASE_IMAGE,
    suite: str = "bookworm",
    workdir: str | Path | None = None,
    mirror: str | None = None,
) -> str:
    """A base image without a registry: debootstrap a minimal Debian with tmux and python3, import it."""
    import shutil
    import subprocess
    import tempfile

    c = client()
    try:
        c.images.get(tag)
        return tag
    except Exception:  # noqa: BLE001
        pass
    if not shutil.which("debootstrap"):
        raise SandboxError("building the base image needs debootstrap (Debian: apt-get install debootstrap)")
    root = Path(tempfile.mkdtemp(prefix="horizon-base-", dir=workdir))
    try:
        cmd = [
            "debootstrap",
            "--variant=minbase",
            "--include=tmux,python3,procps,ca-certificates",
            suite,
            str(root),
        ]
        if mirror:
            cmd.append(mirror)
        subprocess.run(cmd, check=True, capture_output=True)
        archive = root.with_suffix(".tar")
        subprocess.run(["tar", "-C", str(root), "-cf", str(archive), "."], check=True)
        repo, _, version = tag.partition(":")
        c.api.import_image(src=str(archive), repository=repo, tag=version or "latest")
        archive.unlink()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return tag
