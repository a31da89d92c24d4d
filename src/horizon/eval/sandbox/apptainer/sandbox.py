"""The `apptainer` sandbox for clusters: `apptainer instance start / exec / instance stop`.

The image is a `.sif` file or a `docker://` reference (Apptainer converts and caches it); tasks
that only ship a Dockerfile must be built into an image first (docker or podman, then
`apptainer build x.sif docker-daemon://...`), since Apptainer does not build Dockerfiles.
The instance runs with --containall (no host home, /tmp, environment) and --writable-tmpfs (a
throw-away writable layer), the task's files bound at /app, the graders' toolchain read-only at
/opt/horizon, no GPU (--nv is never passed to sandboxes) and, where the site allows it, no network
(--net --network none needs the site's network configuration; `network: host` keeps the host's).

Each exec gets --cleanenv (else Apptainer passes the harness's environment, API keys included, to the
command). Grading uses the protocol's generic steps (sandbox/__init__.py): fresh /tests,
/logs/verifier and HOME made inside, the reward read inside.

Who can change what the tests run: an agent that is not root (the harness is not) cannot write the
image's root-owned files (--writable-tmpfs keeps their permissions), so its programs, libraries and
start-up hooks are the image's; there, kill_agent is `kill -9 -1` inside and no audit runs. As root
(the harness running as root, so is the agent) it can: the instance then gets a directory overlay
(`--overlay DIR`: Apptainer's upper layer is DIR/upper, on the host) instead of the tmpfs, and
kill_agent stops the instance (every process ends, nothing inside runs for it), the integrity audit
reads DIR/upper from the host (overlay.py: whiteouts, opaque directories; the image's side asked
of a fresh container of the image, which nothing of the agent's touches), and only a clean layer
is started again, over the same DIR, for the tests. Root or not, /app is the host's directory the
agent writes: an image's PATH directory there (`ENV PATH=/app/bin:$PATH`) is scanned on the host at
start and before the tests, and audited with the same rules (a `bash` planted in front of the
image's is tampered).

Apptainer is not packaged for Debian 12, so CI tests the command lines (tests/unit/eval/sandbox/apptainer/test_sandbox.py).
"""

from __future__ import annotations

import os
import posixpath
import shlex
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from horizon.eval.sandbox import HARNESS_ENV, ExecResult, Finding, Sandbox, SandboxError, SandboxSpec
from horizon.eval.sandbox.integrity import Entry
from horizon.eval.sandbox.toolchain import GUARD_ENV, GUARD_FILE

_KIND = {"L": "link", "D": "dir", "F": "file", "O": "other"}
# the kind of each path given (one line each: L target, D, F, O, or - when absent), in a fresh container
KINDS = (
    'for p in "$@"; do if [ -L "$p" ]; then printf "L %s\\n" "$(readlink "$p")"; '
    'elif [ -d "$p" ]; then echo D; elif [ -f "$p" ]; then echo F; elif [ -e "$p" ]; then echo O; '
    "else echo -; fi; done"
)


class ApptainerSandbox(Sandbox):
    def __init__(
        self,
        spec: SandboxSpec,
        toolchain: str | Path | None = None,
        image: str | None = None,
        network: str = "none",
        apptainer: str = "apptainer",
        overlay: bool | None = None,
    ):
        self.spec = spec
        # a directory overlay the harness audits, where the agent (root, as the harness) could change
        # the image's files; None: when the harness runs as root
        self.overlay = os.geteuid() == 0 if overlay is None else overlay
        self.toolchain = Path(toolchain) if toolchain else None
        self.image = spec.image or image
        self.network = network
        self.bin = apptainer
        self.name = f"horizon-{uuid.uuid4().hex[:12]}"
        self.root: Path | None = None
        self.running = False

    # -- command lines (unit-tested) ------------------------------------------------------------

    def image_ref(self) -> str:
        if not self.image:
            raise SandboxError(
                f"{self.spec.name}: the apptainer sandbox needs an image (a .sif or docker://...); "
                "this task only has a Dockerfile: build and convert it first (docs/evaluation/sandboxes.md)"
            )
        if self.image.endswith(".sif") or "://" in self.image:
            return self.image
        return f"docker://{self.image}"

    def start_argv(self, app_dir: str) -> list[str]:
        binds = [f"{app_dir}:/app", f"{self.root}/tests:/tests", f"{self.root}/logs:/logs"]
        if self.toolchain:
            binds.append(f"{self.toolchain}:/opt/horizon:ro")
        argv = [
            self.bin,
            "instance",
            "start",
            "--containall",
            *(["--overlay", f"{self.root}/overlay"] if self.overlay else ["--writable-tmpfs"]),
            "--no-home",
            "--cleanenv",
            "--hostname",
            "box",
            "--pwd",
            self.workdir,
            "--bind",
            ",".join(binds),
        ]
        if self.network == "none" and not self.spec.allow_internet:
            argv += ["--net", "--network", "none"]
        return [*argv, self.image_ref(), self.name]

    def exec_argv(self, argv: list[str], cwd: str, env: dict | None, timeout: float | None) -> list[str]:
        out = [self.bin, "exec", "--cleanenv", "--pwd", cwd]  # nothing of the harness's environment inside
        for k, v in (env or {}).items():
            out += ["--env", f"{k}={v}"]
        cmd = list(argv)
        if timeout is not None:
            cmd = ["timeout", "-k", "2", str(max(1, int(timeout + 0.999))), *cmd]
        return [*out, f"instance://{self.name}", *cmd]

    def stop_argv(self) -> list[str]:
        return [self.bin, "instance", "stop", "--force", self.name]

    # -- protocol -------------------------------------------------------------------------------

    def start(self) -> None:
        if not shutil.which(self.bin):
            raise SandboxError(f"{self.bin} is not installed on this machine")
        self.root = Path(tempfile.mkdtemp(prefix="horizon-apptainer-"))
        for d in ("app", "tests", "logs", "overlay"):
            (self.root / d).mkdir()
        if self.spec.workdir_files:
            shutil.copytree(self.spec.workdir_files, self.root / "app", dirs_exist_ok=True)
        self._instance()
        self._app_before = self._scan_app()

    def _app_path_dirs(self) -> list[str]:
        """The image's PATH directories in /app (the task's files, bound from the host) and their parents."""
        dirs = [d.rstrip("/") for d in (self.image_env().get("PATH") or "").split(":")]
        dirs = [d for d in dirs if d == "/app" or d.startswith("/app/")]
        return list(dict.fromkeys(dirs + [posixpath.dirname(d) for d in dirs if d != "/app"]))

    def _scan_app(self) -> dict[str, Entry]:
        """The entries of those directories, read on the host (root/app), no link followed."""
        from horizon.eval.sandbox.overlay import LowerStack, entry_of

        stack, out = LowerStack([self.root / "app"]), {}
        for d in self._app_path_dirs():
            host = stack.find(d[len("/app") :] or "/")
            if host is None or not os.path.isdir(host) or os.path.islink(host):
                continue
            for item in sorted(os.scandir(host), key=lambda e: e.name):
                try:
                    out[f"{d}/{item.name}"] = entry_of(item.path)
                except OSError:
                    continue
        return out

    def _instance(self) -> None:
        argv = self.start_argv(str(self.root / "app"))
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode != 0:
            raise SandboxError(f"{self.spec.name}: {shlex.join(argv)} failed: {r.stderr.strip()[-800:]}")
        self.running = True

    # -- grading (as root: a directory overlay, audited from the host) ------------------------------

    def kill_agent(self) -> None:
        """Not root: kill -9 -1 inside. Root: the instance stops (every process of it ends)."""
        if not self.overlay:
            return super().kill_agent()
        if self.running:
            subprocess.run(self.stop_argv(), capture_output=True)
            self.running = False

    def audit(self) -> Finding | None:
        """/app's PATH directories (host files the agent writes, root or not) against their state at
        start; as root, the overlay's upper directory against the image too."""
        from horizon.eval.sandbox import integrity
        from horizon.eval.sandbox.overlay import OverlayLayer

        image = ImageFiles(self.bin, self.image_ref())
        env = self.image_env()
        path, libs = env.get("PATH") or "", env.get("LD_LIBRARY_PATH") or ""
        dirs = self._app_path_dirs()
        app = integrity.SnapshotLayer(
            getattr(self, "_app_before", {}), self._scan_app(), dirs, [], image.entry
        )
        found = integrity.audit(app, path, libs) if dirs else integrity.Audit()
        upper = self.root / "overlay" / "upper"
        if self.overlay and not self.running and upper.is_dir():
            more = integrity.audit(OverlayLayer(upper, image), path, libs)
            found.tampered += more.tampered
            found.site_changes, found.purge = more.site_changes, more.purge
        if found.tampered:
            return Finding("tampered", found.evidence)
        self._purge = found.purge
        if found.site_changes:  # the pytest guard's list: the toolchain is read-only, so to /logs (GUARD_ENV)
            write_new(self.root / "logs" / GUARD_FILE, "".join(f"{p}\n" for p in found.site_changes))
        return None

    def image_env(self) -> dict[str, str]:
        env = super().image_env()
        if self.root is not None and (self.root / "logs" / GUARD_FILE).exists():
            env[GUARD_ENV] = f"/logs/{GUARD_FILE}"
        return env

    def resume(self) -> None:
        """A new instance over the same overlay (as root, after the audit)."""
        if self.overlay and not self.running and self.root is not None:
            self.name = f"horizon-{uuid.uuid4().hex[:12]}"
            self._instance()

    def reset_for_grading(self, tests_archive: bytes) -> str:
        self.resume()
        home = super().reset_for_grading(tests_archive)
        purge = getattr(self, "_purge", [])
        if purge:
            script = "".join(f"rm -f -- {shlex.quote(p)}\n" for p in purge if "\n" not in p)
            write_new(self.root / "logs" / ".horizon-purge.sh", script)
            self.exec(["sh", "/logs/.horizon-purge.sh"], timeout=60, cwd="/", env=HARNESS_ENV)
            (self.root / "logs" / ".horizon-purge.sh").unlink(missing_ok=True)
        return home

    def alive(self) -> bool:
        if not self.running:
            return False
        r = subprocess.run([self.bin, "instance", "list", self.name], capture_output=True, text=True)
        return self.name in r.stdout

    def exec(self, argv, timeout=None, env=None, cwd=None, input=None, max_bytes=1 << 20) -> ExecResult:
        if not self.running:
            raise SandboxError(f"{self.spec.name}: the sandbox is not running")
        if isinstance(argv, str):
            argv = ["bash", "-c", argv]
        env = {**self.image_env(), **(env or {})}
        t0 = time.monotonic()
        r = subprocess.run(
            self.exec_argv(argv, cwd or self.workdir, env, timeout), input=input, capture_output=True
        )
        rc = r.returncode
        # timed out by the harness's clock: a command that a signal of its own ended (137) is not
        timed_out = timeout is not None and rc in (124, 137) and time.monotonic() - t0 >= timeout
        return ExecResult(
            rc,
            r.stdout[:max_bytes].decode("utf-8", "replace"),
            r.stderr[:max_bytes].decode("utf-8", "replace"),
            timed_out,
        )

    def stop(self) -> None:
        if self.running:
            subprocess.run(self.stop_argv(), capture_output=True)
            self.running = False
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None


def write_new(path: Path, text: str) -> None:
    """A new file in a host directory the agent could write (/logs): whatever it left at that name goes
    first (never followed: a link planted there would send the write elsewhere on the host)."""
    if os.path.lexists(path):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(text)


class ImageFiles:
    """The image's side of the audit: its paths asked of a fresh container of the image (`apptainer
    exec` with nothing of the sandbox's: no overlay, no bind), in batches."""

    def __init__(self, apptainer: str, image: str, run=None):
        self.argv = [apptainer, "exec", "--containall", "--cleanenv", "--no-home", image]
        self.run = run or subprocess.run
        self.kinds: dict[str, tuple[str, str]] = {}
        self.entries: dict[str, Entry | None] = {}

    def prefetch(self, paths: list[str]) -> None:
        todo = [p for p in paths if p not in self.kinds]
        for i in range(0, len(todo), 500):
            chunk = todo[i : i + 500]
            r = self.run([*self.argv, "sh", "-c", KINDS, "sh", *chunk], capture_output=True, text=True)
            lines = r.stdout.splitlines()
            if r.returncode != 0 or len(lines) != len(chunk):
                raise SandboxError(
                    f"reading the image for the integrity audit failed: {r.stderr.strip()[-300:]}"
                )
            for p, line in zip(chunk, lines):
                self.kinds[p] = (line[:1], line[2:])

    def exists(self, path: str) -> bool:
        self.prefetch([path])
        return self.kinds[path][0] != "-"

    def entry(self, path: str) -> Entry | None:
        if path in self.entries:
            return self.entries[path]
        self.prefetch([path])
        kind, target = self.kinds[path]
        e = None
        if kind == "F":
            r = self.run([*self.argv, "cat", "--", path], capture_output=True)
            if r.returncode != 0:
                raise SandboxError(f"reading {path} from the image failed: {r.stderr[-300:]!r}")
            e = file_entry(r.stdout)
        elif kind in _KIND:
            e = Entry(_KIND[kind], target=target)
        self.entries[path] = e
        return e


def file_entry(data: bytes) -> Entry:
    import hashlib

    from horizon.eval.sandbox.integrity import HEAD

    return Entry("file", digest=f"{hashlib.sha256(data).hexdigest()}:{len(data)}", head=data[:HEAD])
