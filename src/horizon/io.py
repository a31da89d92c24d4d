"""Small I/O helpers shared by every stage: atomic outputs, JSON/CSV/parquet writing, the journal of\nresumable stages, tar archives, logging set-up.

Every output of the workflow is complete or absent: it is written under a temporary name in the
same directory and moved into place with os.replace (atomic on POSIX within one filesystem).
"""

from __future__ import annotations

import contextlib
import glob
import io
import json
import logging
import math
import os
import shutil
import sys
import threading
from collections.abc import Iterable, Iterator
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
    _remove_stale_tmps(path)
    try:
        yield tmp
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        _remove(tmp)


def _remove_stale_tmps(path: Path) -> None:
    """The temporary names of `path` that a killed job left (its pid no longer runs here): only one job
    writes an output at a time, so what they hold is never completed."""
    for stale in path.parent.glob(f".{glob.escape(path.name)}.tmp-*"):
        pid = stale.name.rsplit("-", 1)[1]
        if pid.isdigit() and int(pid) != os.getpid() and not _running(int(pid)):
            _remove(stale)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    elif p.exists() or p.is_symlink():
        p.unlink()


def write_json(path: str | Path, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


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


def iter_batches(path: str | Path, columns: list[str] | None = None, batch_rows: int = 256) -> Iterator:
    """Record batches of a parquet file, one row group at a time: pyarrow's whole-file iterator keeps
    buffers of the row groups it has passed, so its memory grows with the file (measured: 15 -> 70 MB
    of Arrow memory from 128 to 2048 trajectories), this one's does not."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    for rg in range(pf.num_row_groups):
        yield from pf.iter_batches(batch_size=batch_rows, columns=columns, row_groups=[rg], use_threads=False)


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


def _csv_cell(v: Any) -> Any:
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.6g}"
    return v


def csv_text(rows: list[dict]) -> str:
    """Rows of dicts as CSV text: columns in first-seen order, floats with 6 significant digits,
    NaN as an empty cell (the one CSV convention of every table and summary)."""
    import csv

    if not rows:
        return ""
    buf = io.StringIO()
    keys = list(dict.fromkeys(k for row in rows for k in row))
    w = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _csv_cell(v) for k, v in r.items()})
    return buf.getvalue()


def write_csv(path: str | Path, rows: list[dict]) -> None:
    """`csv_text(rows)` written atomically."""
    write_text(path, csv_text(rows))


def write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def stamp(path: str | Path, hash_below: int = 64 << 20) -> dict:
    """What identifies a file's content, cheaply: its sha256 below `hash_below` bytes, else its size and
    modification time (a rewritten multi-GB weight file gets a new mtime; hashing it would take minutes)."""
    import hashlib

    p = Path(path)
    st = p.stat()
    if st.st_size < hash_below:
        with open(p, "rb") as fh:
            return {"name": p.name, "sha256": hashlib.file_digest(fh, "sha256").hexdigest()}
    return {"name": p.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def model_files(model_dir: str | Path) -> list[Path]:
    """A model directory's config.json and weight files, sorted; [] where it holds no model (no config,
    or no weights)."""
    d = Path(model_dir)
    weights = [p for pattern in WEIGHT_FILES for p in d.glob(pattern)]
    if not weights or not (d / "config.json").is_file():
        return []
    return sorted({*weights, d / "config.json"})


def model_stamp(model_dir: str | Path) -> list[dict] | str:
    """The stamps of a model directory's config and weights (`stamp`); a path that holds no model (an
    endpoint's name) stands for itself."""
    files = model_files(model_dir)
    return [stamp(p) for p in files] if files else str(model_dir)


WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt")


class Journal:
    """Append-only JSON lines beside a stage's output: the resumable state of a long stage.

    A killed job keeps every line it wrote (flushed and fsynced); a line cut by the kill ends the
    reading, so what follows it is redone. Appends are serialised, so threads may share a journal.

    `made_from` (JSON-able: the model's stamp, the settings that change a record) is kept beside the
    journal (`<name>.made-from.json`); a journal whose inputs differ, or were never recorded, is not
    resumed: it is set aside as `<name>.stale` (the keys that differ logged) and the stage starts afresh.
    """

    def __init__(self, path: str | Path, made_from: Any = None):
        self.path = Path(path)
        self.made_from = (
            None if made_from is None else json.loads(json.dumps(made_from, default=_json_default))
        )
        self.made_from_path = self.path.with_name(self.path.name + ".made-from.json")
        self._fh = None
        self._lock = threading.Lock()

    def read(self) -> list[dict]:
        self._set_aside_if_stale()
        out = []
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    break  # cut by a kill: everything before it is complete
        return out

    def _recorded_inputs(self) -> Any:
        try:
            return json.loads(self.made_from_path.read_text())
        except (OSError, ValueError):
            return None

    def _set_aside_if_stale(self) -> None:
        if self.made_from is None or not self.path.exists():
            return
        old = self._recorded_inputs()
        if old == self.made_from:
            return
        aside = self.path.with_name(self.path.name + ".stale")
        os.replace(self.path, aside)
        self.made_from_path.unlink(missing_ok=True)
        logging.getLogger("horizon.io").warning(
            "%s was made from other inputs (%s): set aside as %s; this run starts afresh",
            self.path,
            _differing(old, self.made_from),
            aside.name,
        )

    def append(self, records: Iterable[dict]) -> None:
        text = "".join(json.dumps(r) + "\n" for r in records)
        with self._lock:
            if self._fh is None:
                self._set_aside_if_stale()
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if self.made_from is not None and self._recorded_inputs() != self.made_from:
                    write_json(self.made_from_path, self.made_from)  # before the first record
                self._fh = open(self.path, "a")
            self._fh.write(text)
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def remove(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
        self.made_from_path.unlink(missing_ok=True)

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _differing(old: Any, new: Any) -> str:
    """Which inputs changed, for the log: the top-level keys, or why there is nothing to compare."""
    if old is None:
        return "its inputs were not recorded"
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        return "changed: " + ", ".join(keys)
    return "changed"


def tar_bytes(src: str | Path, arcname: str) -> bytes:
    """A file or directory as an uncompressed tar archive in memory, under `arcname`."""
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(src), arcname=arcname)
    return buf.getvalue()


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
