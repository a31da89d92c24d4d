"""Small I/O helpers shared by every stage: atomic outputs, JSON/parquet writing, logging set-up.

Every output of the workflow is complete or absent: it is written under a temporary name in the
same directory and moved into place with os.replace (atomic on POSIX within one filesystem).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def tmp_name(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to `path`; on success move it into place, on failure remove it.

    Works for files and for directories (a directory output is built under the temporary name).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_name(path)
    _remove(tmp)
    try:
        yield tmp
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        _remove(tmp)


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    elif p.exists() or p.is_symlink():
        p.unlink()


def write_json(path: str | Path, obj: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def read_json(path: str | Path) -> Any:
    with open(path) as fh:
        return json.load(fh)


def write_table(path: str | Path, table: Any) -> None:
    """Write a pyarrow Table to parquet atomically (zstd, deterministic)."""
    import pyarrow.parquet as pq

    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def setup_logging(log_path: str | Path | None = None, level: int = logging.INFO) -> logging.Logger:
    """Log to the rule's `log:` file and to stderr (Snakemake shows stderr; Slurm keeps it)."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="a"))
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )
    logger = logging.getLogger("horizon")
    # library progress bars (weight loading, shard writing) are noise in a job log: ours are progress lines
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    if "transformers" in sys.modules:
        sys.modules["transformers"].utils.logging.disable_progress_bar()

    # An uncaught error ends up in the rule's log too (Snakemake points users at the log).
    def excepthook(etype, value, tb, _previous=sys.excepthook):
        logger.error("%s: %s", etype.__name__, value, exc_info=(etype, value, tb))
        if _previous is not sys.__excepthook__:
            _previous(etype, value, tb)

    sys.excepthook = excepthook
    return logger


def die_with_parent() -> None:
    """Linux: get SIGKILL when the parent process dies.

    torchrun starts its workers in new sessions, so a killed job (SIGKILL to the job's process
    group) would otherwise leave them running, still writing checkpoints beside the rerun.
    """
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        return
    if os.getppid() == 1:  # the parent is already gone
        os._exit(1)


def write_csv(path: str | Path, rows: list[dict]) -> None:
    """Rows of dicts as CSV, atomically; floats with 6 significant digits."""
    import csv

    with atomic_path(path) as tmp, open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else [])
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display on compute nodes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str | Path) -> None:
    """Save a figure as PNG atomically and free it."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", bbox_inches="tight")
    pyplot().close(fig)
