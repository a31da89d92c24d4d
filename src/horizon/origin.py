"""Which `horizon` the workflow runs: the package the Snakefile was parsed with, in every job too.

The Snakefile imports `horizon` from wherever Python finds it (an editable install, a wheel, a
PYTHONPATH), while each job is a new Python process that finds it again through the PYTHONPATH it
inherits. `job_pythonpath` makes both the same code: the workflow's own `src/` when the imported
package is that folder or a copy of it file for file (a wheel built from this checkout), and an
error naming both folders when they differ, so that parse and jobs never run mixed code.
"""

from __future__ import annotations

import os
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


def job_pythonpath(workflow_dir: str | Path, current: str | None = None, imported: Path | None = None) -> str:
    """The PYTHONPATH jobs get: the folder holding the `horizon` the parse imported, first.

    The workflow's own `src/` is preferred when it holds the same code (it is also what a container
    sees); a different `horizon` raises CodeMismatch naming both folders and the files that differ.
    """
    imported = (imported or package_dir()).resolve()
    bundled = (Path(workflow_dir) / "src" / "horizon").resolve()
    if bundled.is_dir() and bundled != imported:
        diff = differing_files(imported, bundled)
        if diff:
            raise CodeMismatch(
                f"the Snakefile was parsed with horizon from {imported}, but this workflow's own code is "
                f"{bundled}, and they differ ({', '.join(diff)}{' ...' if len(diff) == 5 else ''}); jobs would "
                f"run other code than the parse. Run with the workflow's code (PYTHONPATH={bundled.parent}, "
                f"or pip install -e {bundled.parent.parent}), or run the Snakefile that came with {imported}"
            )
    src = str(bundled.parent if bundled.is_dir() else imported.parent)
    rest = [p for p in (current or "").split(os.pathsep) if p and os.path.abspath(p) != src]
    return os.pathsep.join([src, *rest])
