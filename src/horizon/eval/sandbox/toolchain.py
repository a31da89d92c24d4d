"""The graders' toolchain, provided inside every sandbox without network.

Terminal-Bench and Harbor test scripts fetch uv and pytest at grading time; sandboxes have no
network. We provide, read-only at /opt/horizon (a bind mount, or an archive copied into a
container), for the grader's environment only:

- lib/: pytest and its pure-Python dependencies, copied from this environment
  (PYTHONPATH=/opt/horizon/lib, any python3 >= 3.10 inside the sandbox);
- bin/pytest, bin/py.test: `python3 -m pytest`;
- bin/uv, bin/uvx: a small offline stand-in for the subcommands test scripts use
  (`uv venv`, `uv init`, `uv add`/`uv pip install` of packages already provided: no-ops;
  `uv run CMD`, `uvx pytest`: run CMD with the toolchain on the path); anything else fails loudly;
- bin/curl: passes through to the real curl, except for the uv installer script
  (astral.sh/uv/.../install.sh), for which it returns a no-op installer;
- home/: empty; the grader's HOME is a fresh directory mounted or created there at grading.

The agent's shell never sees these (its PATH does not include /opt/horizon/bin). The grader's
environment (grader_env) is explicit: a fresh HOME, the toolchain first on PATH, no user site
(PYTHONNOUSERSITE) and no current directory on Python's path (PYTHONSAFEPATH, Python >= 3.11), so
that nothing the agent left in its home or in /app is imported by pytest or the test scripts.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import shutil
from pathlib import Path

log = logging.getLogger("horizon.toolchain")

# pytest and every package it imports (pygments since pytest 8; exceptiongroup/tomli on Python < 3.11)
PACKAGES = (
    "pytest",
    "_pytest",
    "pluggy",
    "iniconfig",
    "packaging",
    "pygments",
    "py",
    "exceptiongroup",
    "tomli",
)

UV = r'''#!/usr/bin/env python3
"""Offline stand-in for uv/uvx inside horizon sandboxes (see horizon/sandbox/toolchain.py)."""
import os, sys

TOOLS = os.path.dirname(os.path.abspath(__file__))
PROVIDED = {"pytest", "pluggy", "iniconfig", "packaging"}


def run(cmd):
    os.environ["PATH"] = TOOLS + os.pathsep + os.environ.get("PATH", "")
    lib = os.path.join(os.path.dirname(TOOLS), "lib")
    os.environ["PYTHONPATH"] = lib + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    if cmd and cmd[0] in ("pytest", "py.test"):
        cmd = ["python3", "-m", "pytest"] + cmd[1:]
    if cmd and cmd[0] in ("python", "python3") and len(cmd) > 2 and cmd[1] == "-m" and cmd[2] == "pytest":
        cmd = ["python3"] + cmd[1:]
    os.execvp(cmd[0], cmd)


def names(args):
    out = []
    for a in args:
        if a.startswith("-"):
            continue
        out.append(a.split("==")[0].split(">=")[0].split("<")[0].split("[")[0].strip().lower())
    return out


def main():
    prog = os.path.basename(sys.argv[0])
    args = sys.argv[1:]
    if prog == "uvx":
        return run(args)
    if not args:
        print("uv (horizon offline stand-in)"); return 0
    sub, rest = args[0], args[1:]
    if sub in ("--version", "version"):
        print("uv 0.0.0 (horizon offline stand-in)"); return 0
    if sub in ("venv", "init", "sync", "lock"):
        if sub == "venv":
            d = next((a for a in rest if not a.startswith("-")), ".venv")
            os.makedirs(os.path.join(d, "bin"), exist_ok=True)
            with open(os.path.join(d, "bin", "activate"), "w") as fh:
                fh.write("# horizon offline stand-in: nothing to activate\n")
        return 0
    if sub == "tool" and rest[:1] == ["run"]:
        return run(rest[1:])
    if sub == "run":
        while rest and rest[0].startswith("-"):
            flag = rest.pop(0)
            if flag in ("--with", "--python", "-p", "--project", "--directory") and rest:
                rest.pop(0)
        return run(rest)
    pkgs = []
    if sub == "add":
        pkgs = names(rest)
    elif sub == "pip" and rest[:1] == ["install"]:
        pkgs = names([a for a in rest[1:] if a not in ("-r",)])
    else:
        sys.stderr.write("uv %s: not available offline in this sandbox\n" % sub); return 2
    missing = [p for p in pkgs if p not in PROVIDED]
    if missing:
        sys.stderr.write("uv: no network in this sandbox; not provided: %s\n" % ", ".join(missing)); return 1
    return 0


sys.exit(main())
'''

CURL = r"""#!/bin/sh
# horizon offline stand-in: the uv installer is not needed (uv is provided); everything else goes to curl
for a in "$@"; do
  case "$a" in
    *astral.sh/uv*|*github.com/astral-sh/uv*) echo 'echo "uv is provided offline by horizon"; mkdir -p "$HOME/.local/bin"; : > "$HOME/.local/bin/env"'; exit 0;;
  esac
done
for c in /usr/bin/curl /usr/local/bin/curl /bin/curl; do [ -x "$c" ] && exec "$c" "$@"; done
echo "curl: not installed in this sandbox" >&2; exit 127
"""

PYTEST = '#!/bin/sh\nexport PYTHONPATH="/opt/horizon/lib${PYTHONPATH:+:$PYTHONPATH}"\nexec python3 -m pytest "$@"\n'


def build(out_dir: str | Path) -> Path:
    """Write the toolchain directory (idempotent)."""
    out = Path(out_dir)
    stamp = out / ".complete"
    if stamp.exists() and (out / "home").is_dir():
        return out
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "lib").mkdir(parents=True)
    (tmp / "bin").mkdir()
    (tmp / "home").mkdir()
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            if name in ("pytest", "_pytest", "pluggy"):
                raise RuntimeError(f"the grader toolchain needs {name} installed in this environment")
            continue
        src = Path(spec.origin)
        if src.name == "__init__.py":
            shutil.copytree(
                src.parent,
                tmp / "lib" / src.parent.name,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            )
        else:
            shutil.copy2(src, tmp / "lib" / src.name)
    for dist in (
        "pytest",
        "pluggy",
        "iniconfig",
        "packaging",
        "pygments",
    ):  # metadata: pytest asks for versions
        try:
            d = importlib.metadata.distribution(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        info = Path(d._path)  # the .dist-info directory
        if info.is_dir():
            shutil.copytree(info, tmp / "lib" / info.name, ignore=shutil.ignore_patterns("RECORD"))
    # bytecode compiled now: the sandbox mounts lib/ read-only, so Python could not cache it there
    # (an interpreter of another minor version ignores these files and compiles in memory)
    import compileall

    compileall.compile_dir(tmp / "lib", quiet=1, workers=1)
    for name, text in (("uv", UV), ("uvx", UV), ("curl", CURL), ("pytest", PYTEST), ("py.test", PYTEST)):
        p = tmp / "bin" / name
        p.write_text(text)
        p.chmod(0o755)
    (tmp / ".complete").write_text("ok\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    log.info("grader toolchain at %s", out)
    return out


GRADER_ENV = {
    "PATH": "/opt/horizon/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "PYTHONPATH": "/opt/horizon/lib",
}


def grader_env(home: str) -> dict[str, str]:
    """The whole environment the tests run with (nothing of the agent's, nothing of the harness's)."""
    return {**GRADER_ENV, "HOME": home, "PYTHONNOUSERSITE": "1", "PYTHONSAFEPATH": "1", "LANG": "C.UTF-8",
            "TERM": "xterm-256color", "TEST_DIR": "/tests"}  # fmt: skip


class temporary:
    """A toolchain built in a temporary directory for one job, removed afterwards (and, if the job is
    killed, by the next job's start: the directory's name carries the pid)."""

    def __enter__(self) -> Path:
        import os
        import tempfile

        from horizon.eval.sandbox.hostfs import sweep_dirs

        sweep_dirs("horizon-tools-")
        self.dir = Path(tempfile.mkdtemp(prefix=f"horizon-tools-{os.getpid()}-"))
        self.dir.chmod(0o755)  # sandboxes run under other uids and bind it read-only
        return build(self.dir / "toolchain")

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
