"""The `docker` sandbox: one container per attempt, through the Docker SDK (honours DOCKER_HOST).

Image: the task's prebuilt `docker_image`, or its Dockerfile built once per content hash
(image.py: the cache, FROM images mapped onto local ones, what cannot be had here named
Unsupported). The task's working directory (else the image's WORKDIR) and environment are the
container's; the tests see the container's environment too. Limits from the task (cpus, memory)
and the run (processes); `network_mode=none` unless the task gets the network (eval.network). Every container carries labels (horizon.run, horizon.task,
horizon.attempt, horizon.repeat) and is removed on stop(); the rollout job removes the containers
of its own run left by a killed earlier run when it starts (`sweep`), and its SIGTERM/SIGINT
handler stops the live ones.

tmux must be in the image (the Terminal-Bench base images and our base image have it). The
container's pid 1 is a shell loop that reaps orphans: the kernel never delivers a signal sent from
inside to it, so `kill -9 -1` by the agent ends the agent's processes, not the container.

Grading trusts nothing the agent could have changed. kill_agent stops the container through the
daemon (SIGKILL to pid 1: every process in it ends, whatever the image's programs are); the audit
then reads the stopped container's writable layer from the daemon's side (layer.py, integrity.py);
only if the agent changed nothing that decides a grade is the container started again (pid 1 and
every program the tests run are then the image's), /tests, /logs/verifier and the graders'
toolchain (pytest, its plugin guard with the audit's list, the wheelhouse, the uv wrapper, with an
empty HOME for the grader; the real uv binary only for tests that call uv) recreated, the toolchain
and the tests copied in with put_archive (which also works with a remote daemon), and the standard
library's bytecode that the agent wrote removed; the agent never sees the toolchain. After the
tests the container is stopped again and the reward read through the daemon (get_archive).
The task's storage_mb: storage.py. What the container boundary covers and what it does not:
docs/evaluation/security.md.

Errors name what failed: the daemon (unreachable, or failing a call), pulling, building, starting.
"""

from __future__ import annotations

import io
import logging
import re
import shlex
import tarfile
import time
from pathlib import Path

from horizon.eval.sandbox import (
    HARNESS_ENV,
    RESET_DIRS,
    Diagnosis,
    ExecResult,
    Finding,
    Sandbox,
    SandboxError,
    SandboxSpec,
)
from horizon.eval.sandbox.docker import storage
from horizon.eval.sandbox.docker.image import daemon_host, ensure_image, sdk_errors
from horizon.io import tar_bytes

log = logging.getLogger("horizon.eval.sandbox.docker")

LABEL = "horizon.sandbox"
BASE_IMAGE = "horizon-base:bookworm"
# pid 1: immune to signals from inside; `wait` reaps every child, orphans reparented to it included
PID1 = ["sh", "-c", "trap '' HUP INT TERM; while :; do sleep 3600 & wait; done"]
_toolchain_tars: dict[str, bytes] = {}
GO_MODE_TYPE = 0x8F280000  # Go's fs.ModeType bits in get_archive's stat: anything but a regular file


def client(base_url: str | None = None):
    """The SDK's client of the daemon at DOCKER_HOST, or of the Docker-compatible service at `base_url`
    (the podman sandbox's)."""
    try:
        import docker
    except ImportError:
        raise SandboxError("the docker sandbox needs the docker SDK: pip install 'horizon[docker]'") from None
    daemon, _ = sdk_errors()
    try:
        c = docker.DockerClient(base_url=base_url, timeout=600) if base_url else docker.from_env(timeout=600)
        c.ping()
        return c
    except daemon as e:
        raise SandboxError(f"cannot reach the Docker daemon at {base_url or daemon_host()}: {e}") from None


def sweep(run_id: str, c=None) -> int:
    """Remove containers of this run left behind by a killed earlier run of the same job (its sandboxes
    and the pristine containers its integrity audits read the image from)."""
    from horizon.eval.sandbox.docker.layer import PRISTINE_LABEL

    c = c or client()
    stale = c.containers.list(all=True, filters={"label": [f"{LABEL}=1", f"horizon.run={run_id}"]})
    stale += c.containers.list(all=True, filters={"label": [f"{PRISTINE_LABEL}=1", f"horizon.run={run_id}"]})
    for ct in stale:
        ct.remove(force=True)
    if stale:
        log.warning("removed %d stale container(s) of run %s", len(stale), run_id)
    return len(stale)


class DockerSandbox(Sandbox):
    grader_home = "/opt/horizon/home"
    engine = "docker"  # the name in Unsupported reasons

    def __init__(
        self,
        spec: SandboxSpec,
        toolchain: str | Path | None = None,
        base_image: str = BASE_IMAGE,
        max_processes: int | None = None,
        image_map: dict | None = None,
    ):
        self.spec = spec
        self.image_map = dict(image_map or {})
        self._workdir = spec.workdir or "/"
        self.toolchain = Path(toolchain) if toolchain else None
        self.base_image = base_image
        self.max_processes = max_processes or spec.max_processes
        self.container = None
        self.started_at = 0
        self.halted = False  # stopped by the harness to grade it (kill_agent), not by anything inside
        self.exhausted: str | None = None  # the storage watch's evidence, once the layer outgrew storage_mb
        self.ended: Diagnosis | None = None  # how the container ended, when it did before grading
        self.watch: storage.StorageWatch | None = None
        self._guard_list: list[str] = []  # the audit's site-directory changes, for the pytest guard
        self._purge: list[str] = []  # bytecode to remove before the tests

    def connect(self):
        """The SDK's client of this sandbox's engine (the podman sandbox: its service's socket)."""
        return client()

    def start(self) -> None:
        c = self.connect()
        image = ensure_image(c, self.spec, self.base_image, self.image_map, self.engine)
        labels = {LABEL: "1", **{k: str(v) for k, v in self.spec.labels.items()}}
        if not self.spec.workdir:  # the image's own WORKDIR, as docker exec would use it
            self._workdir = (c.images.get(image).attrs.get("Config") or {}).get("WorkingDir") or "/"
        self.started_at = int(time.time()) - 1
        self.container = self._run(c, image, labels)
        limit = self.spec.storage_mb << 20
        disk = storage.local_data_root(c)
        upper = storage.upper_dir(self.container) if disk else None
        self.watch = storage.StorageWatch(c, self.container.id, limit, self._outgrown, disk, upper).start()
        self.exec(["mkdir", "-p", self._workdir, "/logs"], timeout=30, cwd="/", env=HARNESS_ENV)
        if self.exec(["sh", "-c", "command -v tmux"], timeout=30, cwd="/").rc != 0:
            self.stop()
            raise SandboxError(f"{self.spec.name}: the image {image} has no tmux (add it to the image)")

    def _run(self, c, image: str, labels: dict):
        """The container, its writable layer limited to storage_mb where the daemon's driver can."""
        daemon, _ = sdk_errors()
        kw = dict(
            command=PID1,
            detach=True,
            labels=labels,
            working_dir=self._workdir,
            network_mode=None if self.spec.allow_internet else "none",
            hostname="box",
            nano_cpus=int(self.spec.cpus * 1e9),
            mem_limit=f"{self.spec.memory_mb}m",
            pids_limit=self.max_processes,
            environment={"TERM": "xterm-256color", **self.spec.env},
            **self.run_options(),
        )
        opt = storage.size_option(c, self.spec.storage_mb)
        try:
            try:
                ct = c.containers.run(image, **kw, **opt)
                if opt:
                    storage.accepted(c)
                return ct
            except daemon as e:
                if not (opt and storage.refused(c, e)):
                    raise
                return c.containers.run(image, **kw)
        except daemon as e:
            self._remove_unstarted(c, labels)
            raise SandboxError(f"{self.spec.name}: starting a container of {image} failed: {e}") from None

    def run_options(self) -> dict:
        """More of the container's settings, where an engine needs them (podman: its rlimits)."""
        return {}

    def _remove_unstarted(self, c, labels: dict) -> None:
        """A container created whose start failed (`run` is create + start) goes too."""
        daemon, _ = sdk_errors()
        try:
            for ct in c.containers.list(all=True, filters={"label": [f"{k}={v}" for k, v in labels.items()]}):
                if ct.status == "created":
                    ct.remove(force=True)
        except daemon as e:
            log.warning("%s: removing a container that did not start failed: %s", self.spec.name, e)

    def _outgrown(self, size: int) -> None:
        """The storage watch: the layer is over storage_mb; the container is stopped (the writer ends)."""
        self.exhausted = (
            f"the container's writable layer reached {size / 2**20:.0f} MB, over the task's storage_mb "
            f"({self.spec.storage_mb} MB); the harness stopped it"
        )
        log.warning("%s: %s", self.spec.name, self.exhausted)
        try:
            self._halt()
        except SandboxError as e:
            log.warning("%s: stopping the container failed: %s", self.spec.name, e)

    @classmethod
    def sweep(cls, run_id: str) -> int:
        return sweep(run_id)

    @property
    def workdir(self) -> str:
        return self._workdir

    def image_env(self) -> dict[str, str]:
        """The container's environment (its image's ENV lines and the task's), as docker exec gives it."""
        if self.container is None:
            return dict(self.spec.env)
        pairs = (e.partition("=") for e in (self.container.attrs.get("Config") or {}).get("Env") or [])
        return {k: v for k, _, v in pairs if k != "TERM"}

    def alive(self) -> bool:
        if self.container is None:
            return False
        daemon, _ = sdk_errors()
        try:
            self.container.reload()
            return self.container.status == "running"
        except daemon:
            return False

    def stop(self) -> None:
        if self.watch is not None:
            self.watch.stop()
            self.watch = None
        if self.container is not None:
            daemon, missing = sdk_errors()
            try:
                self.container.remove(force=True)
            except missing:
                pass
            except daemon as e:
                log.warning("%s: removing the container failed: %s", self.spec.name, e)
            self.container = None

    def exec(
        self, argv, timeout=None, env=None, cwd=None, input=None, max_bytes=1 << 20, user=""
    ) -> ExecResult:
        if self.container is None:
            raise SandboxError(f"{self.spec.name}: the sandbox is not running")
        if self.halted:
            raise SandboxError(f"{self.spec.name}: the harness stopped the container")
        if isinstance(argv, str):
            argv = ["bash", "-c", argv]
        if input is not None:
            raise SandboxError("docker exec with input is not supported: use put()")
        cmd = list(argv)
        if timeout is not None:  # coreutils timeout inside the container: the command dies, not just the wait
            cmd = ["timeout", "-k", "2", str(max(1, int(timeout + 0.999))), *cmd]
        api = self.container.client.api
        daemon, _ = sdk_errors()
        t0 = time.monotonic()
        try:
            ex = api.exec_create(
                self.container.id,
                cmd,
                workdir=cwd or self.workdir,
                environment=env or {},
                stdout=True,
                stderr=True,
                user=user,
            )
            stream = api.exec_start(ex["Id"], stream=True, demux=True)
            out, err = bytearray(), bytearray()
            for o, e in stream:
                if o and len(out) < max_bytes:
                    out += o[: max_bytes - len(out)]
                if e and len(err) < max_bytes:
                    err += e[: max_bytes - len(err)]
            rc = api.exec_inspect(ex["Id"])["ExitCode"]
        except daemon as e:
            raise SandboxError(f"{self.spec.name}: docker exec of {cmd[0]} failed: {e}") from None
        # timed out by the harness's clock: a command killed by a signal of its own (SIGKILL: 137) is not
        timed_out = timeout is not None and rc in (124, 137) and time.monotonic() - t0 >= timeout
        return ExecResult(
            rc if rc is not None else -1,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
            timed_out,
        )

    def kill_agent(self) -> None:
        """Every process in the container ends: the daemon sends SIGKILL to pid 1 (nothing inside runs a
        program for this, so nothing the agent changed can stop it). The container stays stopped until
        the audit has read its layer and reset_for_grading (or resume) starts it again. A container that
        had already ended is not started again: how it ended is the audit's finding."""
        if not self.halted and self.ended is None:
            daemon, _ = sdk_errors()
            try:
                self.container.reload()
                if self.container.status != "running":
                    self.ended = self.diagnose()
            except daemon:
                pass
        self._halt()

    def _halt(self) -> None:
        daemon, missing = sdk_errors()
        self.halted = True
        try:
            self.container.kill()
        except missing:
            raise SandboxError(f"{self.spec.name}: the container was removed outside the harness") from None
        except daemon:
            pass  # not running any more (the agent ended it, or a halt before): wait says
        try:
            self.container.wait(timeout=60)
        except daemon as e:
            raise SandboxError(f"{self.spec.name}: stopping the container failed: {e}") from None

    def resume(self) -> None:
        """Start the stopped container again (pid 1 anew; no process of the agent's is left)."""
        if not self.halted or self.exhausted:
            return
        daemon, _ = sdk_errors()
        self.started_at = int(time.time()) - 1  # the daemon's kill events of the harness's own halt are older
        try:
            self.container.start()
        except daemon as e:
            raise SandboxError(f"{self.spec.name}: starting the container again failed: {e}") from None
        self.halted = False

    def audit(self) -> Finding | None:
        """The stopped container's layer, read from the daemon's side: storage outgrown, or tampered."""
        from horizon.eval.sandbox import integrity
        from horizon.eval.sandbox.docker.layer import layer_of

        if self.exhausted:
            return Finding("sandbox_exhausted", self.exhausted)
        if self.ended is not None:  # it ended before the harness stopped it
            if self.ended.agents_doing:
                return Finding(self.ended.failure_mode, self.ended.evidence)
            raise SandboxError(f"{self.spec.name}: the container ended before grading", self.ended.evidence)
        env = self.image_env()
        layer = layer_of(self.container, self.spec.labels.get("horizon.run", ""))
        found = integrity.audit(layer, env.get("PATH") or "", env.get("LD_LIBRARY_PATH") or "")
        self._guard_list, self._purge = found.site_changes, found.purge
        if found.tampered:
            return Finding("tampered", found.evidence)
        return None

    def reset_for_grading(self, tests_archive: bytes) -> str:
        from horizon.eval.sandbox.toolchain import GUARD_CHANGED

        self.resume()
        home = self.grader_home
        r = self.exec(
            ["sh", "-c", "rm -rf /opt/horizon\n" + RESET_DIRS], timeout=60, cwd="/", user="0", env=HARNESS_ENV
        )
        if r.rc != 0:
            raise SandboxError(f"{self.spec.name}: recreating /tests and /logs failed: {r.stderr[-300:]}")
        self._put_archive("/tests", tests_archive, "the tests")
        if self.toolchain is not None:
            self._put_archive("/opt", _toolchain_tar(self.toolchain), "the graders' toolchain")
            if re.search(rb"\buvx?\b", tests_archive):  # the real uv (38 MB) only for tests that call it
                self._put_archive("/opt/horizon", _toolchain_tar(self.toolchain / "libexec", "libexec"), "uv")
            if self._guard_list:
                text = "".join(p + "\n" for p in self._guard_list if "\n" not in p).encode()
                self._put_archive(*_one_file(GUARD_CHANGED, text), "the pytest guard's list")
        self._remove_bytecode()
        owner = (self.container.attrs.get("Config") or {}).get("User") or "0"
        if owner in ("0", "root"):  # the archive made it, owned by root
            return home
        r = self.exec(
            ["sh", "-c", f'chown "$1" {home} && chmod 700 {home}', "sh", owner],
            timeout=30,
            cwd="/",
            user="0",
            env=HARNESS_ENV,
        )
        if r.rc != 0:
            raise SandboxError(f"{self.spec.name}: making the grader's HOME failed: {r.stderr[-300:]}")
        return home

    def _remove_bytecode(self) -> None:
        """The standard library's bytecode the agent wrote goes (Python compiles it again from source)."""
        if not self._purge:
            return
        script = "".join(f"rm -f -- {shlex.quote(p)}\n" for p in self._purge if "\n" not in p)
        self._put_archive(*_one_file("/opt/horizon/purge.sh", script.encode()), "the bytecode list")
        r = self.exec(["sh", "/opt/horizon/purge.sh"], timeout=60, cwd="/", user="0", env=HARNESS_ENV)
        if r.rc != 0:
            raise SandboxError(f"{self.spec.name}: removing the agent's bytecode failed: {r.stderr[-300:]}")

    def read_first(self, paths: list[str], cap: int) -> tuple[str | None, bytes | None, str]:
        """Through the daemon (get_archive; the container may be stopped): no program inside reads it."""
        from horizon.eval.sandbox.docker.layer import first_file

        daemon, missing = sdk_errors()
        for path in paths:
            try:
                stream, st = self.container.get_archive(path)
            except missing:
                continue
            except daemon as e:
                return None, None, str(e)
            if st.get("mode", 0) & GO_MODE_TYPE:  # a directory, link, pipe, socket, device
                return path, None, ""
            data = first_file(stream, cap + 1)
            return path, data, ""
        return None, None, ""

    def _put_archive(self, parent: str, data: bytes, what: str) -> None:
        daemon, _ = sdk_errors()
        try:
            ok = self.container.put_archive(parent, data)
        except daemon as e:
            raise SandboxError(f"{self.spec.name}: copying {what} to {parent} failed: {e}") from None
        if not ok:
            raise SandboxError(f"{self.spec.name}: copying {what} to {parent} failed")

    def diagnose(self) -> Diagnosis:
        daemon, missing = sdk_errors()
        if self.container is None:
            return Diagnosis("lost", f"{self.spec.name}: the container was never started")
        if self.exhausted:
            return Diagnosis("exhausted", self.exhausted)
        if self.ended is not None:
            return self.ended
        try:
            self.container.reload()
        except missing:
            return Diagnosis("lost", "the container was removed outside the harness")
        except daemon as e:
            return Diagnosis("lost", f"the Docker daemon at {daemon_host()} does not answer: {e}")
        state = self.container.attrs["State"]
        if self.halted:
            return Diagnosis("healthy", "the harness stopped the container to grade it")
        if state["Status"] != "running":
            return self._stopped(state)
        pids = self._pids()
        try:
            r = self.exec(["true"], timeout=10, cwd="/", env=HARNESS_ENV)
            why = "" if r.ok else f"{r.rc}: {r.stderr[-300:]}"
        except SandboxError as e:
            why = str(e)
        if not why:
            return Diagnosis("healthy", f"the container is up and runs commands (pids {pids})")
        if pids and pids[0] >= pids[1] - 1:
            return Diagnosis(
                "exhausted", f"the container holds {pids[0]} of its {pids[1]} processes; `true`: {why}"
            )
        try:  # it may have stopped between the first look and the probe: then say how it ended
            self.container.reload()
            if self.container.attrs["State"]["Status"] != "running":
                return self._stopped(self.container.attrs["State"])
        except (missing, daemon):
            pass
        return Diagnosis("lost", f"the container is up but `true` cannot run in it: {why}")

    def _stopped(self, state: dict) -> Diagnosis:
        """How a container that is no longer running ended, from its state and the daemon's events."""
        code = state.get("ExitCode")
        if state.get("OOMKilled"):
            return Diagnosis(
                "exhausted",
                f"the container's memory limit ({self.spec.memory_mb} MB) OOM-killed it (exit {code})",
            )
        signals = self._kills_through_the_daemon()
        if signals:
            return Diagnosis(
                "lost",
                f"the container was killed through the Docker daemon (signal "
                f"{', '.join(signals)}; exit {code}), not from inside",
            )
        return Diagnosis(
            "killed",
            f"the container exited ({code}) while the daemon is up, nobody killed it "
            "through the daemon, and its pid 1 ignores signals from inside",
        )

    def _kills_through_the_daemon(self) -> list[str]:
        """Signals sent to the container through the daemon's API since it started (`docker kill`, ...)."""
        daemon, _ = sdk_errors()
        try:
            events = self.container.client.events(
                since=self.started_at,
                until=int(time.time()) + 1,
                decode=True,
                filters={"container": self.container.id, "event": "kill"},
            )
            return [e.get("Actor", {}).get("Attributes", {}).get("signal", "?") for e in events]
        except daemon:
            return ["unknown (the daemon's events could not be read)"]

    def _pids(self) -> tuple[int, int] | None:
        daemon, _ = sdk_errors()
        try:
            stats = self.container.stats(stream=False, one_shot=True).get("pids_stats") or {}
        except daemon:
            return None
        return (stats["current"], stats.get("limit") or self.max_processes) if "current" in stats else None

    def put(self, src: Path, dest: str) -> None:
        parent, name = dest.rsplit("/", 1)
        parent = parent or "/"
        self.exec(["mkdir", "-p", parent], timeout=30, cwd="/", env=HARNESS_ENV)
        self._put_archive(parent, tar_bytes(Path(src), name), str(src))

    def get(self, src: str, dest: Path) -> bool:
        daemon, _ = sdk_errors()
        try:
            stream, _ = self.container.get_archive(src)
            buf = io.BytesIO(b"".join(stream))
        except daemon:
            return False
        with tarfile.open(fileobj=buf) as tar:
            member = tar.getmembers()[0]
            f = tar.extractfile(member)
            if f is None:
                return False
            Path(dest).parent.mkdir(parents=True, exist_ok=True)
            Path(dest).write_bytes(f.read())
        return True


def _one_file(path: str, data: bytes) -> tuple[str, bytes]:
    """(parent, archive) of a single root-owned file, for put_archive."""
    parent, name = path.rsplit("/", 1)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    return parent, buf.getvalue()


def _toolchain_tar(path: Path, name: str = "horizon") -> bytes:
    """The toolchain as an archive, without the uv binary (its own archive: libexec); built once per job."""
    key = str(path)
    if key not in _toolchain_tars:
        data = tar_bytes(path, name)
        if name == "horizon":  # leave libexec/ out of the core archive
            src, out = tarfile.open(fileobj=io.BytesIO(data)), io.BytesIO()
            with tarfile.open(fileobj=out, mode="w") as tar:
                for m in src.getmembers():
                    if not m.name.startswith("horizon/libexec"):
                        tar.addfile(m, src.extractfile(m) if m.isfile() else None)
            data = out.getvalue()
        _toolchain_tars[key] = data
    return _toolchain_tars[key]
