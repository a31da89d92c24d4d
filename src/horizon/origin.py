"""Which `horizon` the workflow runs: the package the Snakefile was parsed with, in every job too.

The Snakefile imports `horizon` from wherever Python finds it (an editable install, a wheel, a
PYTHONPATH), while each job is a new Python process that finds it again through the PYTHONPATH it
inherits. `job_pythonpath` makes both the same code: the workflow's own `src/` when the imported
package is that folder or a copy of it file for file (a wheel built from this checkout), and an
error naming both folders when they differ, so that parse and jobs never run mixed code.

A workflow fetched from a remote source (`module ... snakefile: github(...)` or a URL) has no `src/`
to import: the installed package runs it, and `check_release` stops the parse when its version is
not the fetched workflow's.
"""

from __future__ import annotations

import os
import site
from pathlib import Path


class CodeMismatch(RuntimeError):
    """The imported `horizon` and the workflow's own source differ."""


def package_dir() -> Path:
    """The folder of the `horizon` package this process imported."""
    import horizon

    return Path(horizon.__file__).resolve().parent


def differing_files(a: Path, b: Path, limit: int = 5) -> list[str]:
    """Python files (relative paths) that differ between two package folders: missing on a side, or other bytes."""

    def sources(root: Path) -> dict[str, Path]:
        return {str(p.relative_to(root)): p for p in root.rglob("*.py") if "__pycache__" not in p.parts}

    left, right = sources(a), sources(b)
    out = sorted(set(left) ^ set(right))
    for name in sorted(set(left) & set(right)):
        if len(out) >= limit:
            break
        pa, pb = left[name], right[name]
        if pa.stat().st_size != pb.stat().st_size or pa.read_bytes() != pb.read_bytes():
            out.append(name)
    return out[:limit]


def job_pythonpath(
    workflow_dir: str | Path | None, current: str | None = None, imported: Path | None = None
) -> str:
    """The PYTHONPATH jobs get: the folder holding the `horizon` the parse imported, first.

    The workflow's own `src/` is preferred when it holds the same code (it is also what a container
    sees); a different `horizon` raises CodeMismatch naming both folders and the files that differ.
    A workflow without a source of its own (`workflow_dir` None: fetched from a remote source) runs
    the imported package; from this environment's site-packages, jobs find it anyway and `current`
    is kept as it is (site-packages ahead of the standard library could shadow it).
    """
    imported = (imported or package_dir()).resolve()
    own = Path(workflow_dir, "src", "horizon").resolve() if workflow_dir is not None else None
    if own is None or not own.is_dir():
        if imported.parent in site_packages():
            return current or ""
        own = imported
    elif own != imported:
        diff = differing_files(imported, own)
        if diff:
            raise CodeMismatch(
                f"the Snakefile was parsed with horizon from {imported}, but this workflow's own code is "
                f"{own}, and they differ ({', '.join(diff)}{' ...' if len(diff) == 5 else ''}); jobs would "
                f"run other code than the parse. Run with the workflow's code (PYTHONPATH={own.parent}, "
                f"or pip install -e {own.parent.parent}), or run the Snakefile that came with {imported}"
            )
    src = str(own.parent)
    rest = [p for p in (current or "").split(os.pathsep) if p and os.path.abspath(p) != src]
    return os.pathsep.join([src, *rest])


def site_packages() -> set[Path]:
    """This environment's site-packages folders (the user's too): a new interpreter searches them."""
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    return {Path(p).resolve() for p in [*site.getsitepackages(), *([user] if user else [])]}


def check_release(workflow_version: str, source: str, install: str) -> None:
    """Stop (CodeMismatch naming both) when the imported `horizon` is not the version of the workflow
    fetched from `source`; `install` is the command that installs the workflow's version."""
    import horizon

    if horizon.__version__ != workflow_version:
        raise CodeMismatch(
            f"the workflow fetched from {source} is horizon {workflow_version}, but the horizon package this "
            f"environment imports ({package_dir()}) is {horizon.__version__}: the rules would run other code "
            f"than theirs. Install the workflow's version ({install}), or use the workflow of the installed "
            f"one (its tag for {horizon.__version__})"
        )
