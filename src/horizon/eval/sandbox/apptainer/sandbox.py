"""The `apptainer` sandbox for clusters: `apptainer instance start / exec / instance stop`.

The image is a `.sif` file or a `docker://` reference (Apptainer converts and caches it); tasks
that only ship a Dockerfile must be built into an image first (docker or podman, then
`apptainer build x.sif docker-daemon://...`), since Apptainer does not build Dockerfiles.
The instance runs with --containall (no host home, /tmp, environment) and --writable-tmpfs (a
throw-away writable layer), the task's files bound at /app, the graders' toolchain read-only at
/opt/horizon, no GPU (--nv is never passed to sandboxes) and, where the site allows it, no network
(--net --network none needs the site's network configuration; `network: host` keeps the host's).

Each exec gets --cleanenv (else Apptainer passes the harness's environment, API keys included, to the
command). Grading uses the protocol's generic steps (sandbox/__init__.py): kill -9 -1 inside, fresh
/tests, /logs/verifier and HOME made inside.

Apptainer is not packaged for Debian 12, so CI tests the command lines (tests/unit/eval/sandbox/apptainer/test_sandbox.py).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from horizon.eval.sandbox import ExecResult, Sandbox, SandboxError, SandboxSpec


class ApptainerSandbox(Sandbox):
    def __init__(
        self,
        spec: SandboxSpec,
        toolchain: str | Path | None = None,
        image: str | None = None,
        network: str = "none",
        apptainer: str = "apptainer",
    ):
        self.spec = spec
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
            "--writable-tmpfs",
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
        for d in ("app", "tests", "logs"):
            (self.root / d).mkdir()
        if self.spec.workdir_files:
            shutil.copytree(self.spec.workdir_files, self.root / "app", dirs_exist_ok=True)
        r = subprocess.run(self.start_argv(str(self.root / "app")), capture_output=True, text=True)
        if r.returncode != 0:
            raise SandboxError(
                f"{self.spec.name}: {shlex.join(self.start_argv(str(self.root / 'app')))} failed: "
                f"{r.stderr.strip()[-800:]}"
            )
        self.running = True

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
        r = subprocess.run(
            self.exec_argv(argv, cwd or self.workdir, env, timeout), input=input, capture_output=True
        )
        rc = r.returncode
        return ExecResult(
            rc,
            r.stdout[:max_bytes].decode("utf-8", "replace"),
            r.stderr[:max_bytes].decode("utf-8", "replace"),
            timeout is not None and rc in (124, 137),
        )

    def stop(self) -> None:
        if self.running:
            subprocess.run(self.stop_argv(), capture_output=True)
            self.running = False
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
