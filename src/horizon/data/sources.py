"""Where the teacher corpus comes from: download (or locate) the raw files, and read their rows.

`download` lists the corpus files in raw/manifest.json (a hub snapshot in the HF cache, or local
files referenced in place); `iter_rows` streams the rows of one file in batches (bounded memory),
marking unreadable lines instead of failing on them. horizon.data.normalize consumes both.
"""

from __future__ import annotations

import fnmatch
import gzip
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from horizon.io import write_json

log = logging.getLogger("horizon.data.sources")

DATA_SUFFIXES = (".parquet", ".jsonl", ".jsonl.gz")
METADATA_COLUMNS = ("agent", "model", "model_provider", "date", "episode", "run_id", "trial_name")


class CorpusError(ValueError):
    """A corpus file cannot be read at all; the message names the file."""


def data_format(path: str | Path) -> str | None:
    name = str(path)
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith(".jsonl") or name.endswith(".jsonl.gz"):
        return "jsonl"
    return None


# ---------------------------------------------------------------------------------------------
# download


def _local_files(source: Path) -> list[dict]:
    if source.is_file():
        fmt = data_format(source)
        if fmt is None:
            raise CorpusError(
                f"corpus file {source}: unsupported format (expected one of {', '.join(DATA_SUFFIXES)})"
            )
        return [{"path": str(source.resolve()), "source": source.name, "format": fmt}]
    files = []
    for p in sorted(source.rglob("*")):
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(source).parts):
            fmt = data_format(p)
            if fmt is None:
                log.info("skipping %s: not a corpus file (%s)", p, ", ".join(DATA_SUFFIXES))
                continue
            files.append({"path": str(p.resolve()), "source": str(p.relative_to(source)), "format": fmt})
    if not files:
        raise CorpusError(f"corpus directory {source}: no {', '.join(DATA_SUFFIXES)} files in it")
    return files


def config_of(relpath: str, patterns: Mapping[str, Sequence[str]]) -> str:
    for name, pats in patterns.items():
        if any(fnmatch.fnmatch(relpath, p) for p in pats):
            return name
    return relpath


def download(
    source: str,
    out_dir: str | Path,
    configs: Sequence[str] = (),
    config_patterns: Mapping[str, Sequence[str]] | None = None,
    revision: str = "main",
) -> dict:
    """Make `out_dir/manifest.json` list the corpus files; download them first if `source` is a hub id.

    A local file or directory is referenced in place (not copied). A hub dataset is fetched with
    huggingface_hub.snapshot_download into the HF cache (HF_HOME, HF_HUB_OFFLINE are honoured), only
    the files of the chosen configs, and the resolved commit is recorded.
    """
    out_dir = Path(out_dir)
    local = Path(source)
    if local.exists():
        manifest = {"source": str(local.resolve()), "kind": "local", "files": _local_files(local)}
    elif local.is_absolute() or source.startswith(".") or source.count("/") != 1:
        raise CorpusError(
            f"corpus.source {source!r}: no such file or directory, and not a hub id (owner/name)"
        )
    else:
        patterns = dict(config_patterns or {})
        unknown = [c for c in configs if c not in patterns]
        if unknown:
            raise CorpusError(
                f"corpus.configs: unknown config(s) {', '.join(unknown)} (known: {', '.join(patterns)}; "
                "add a pattern under corpus.config_patterns)"
            )
        allow = [p for c in configs for p in patterns[c]]
        from huggingface_hub import snapshot_download

        try:
            snap = Path(
                snapshot_download(
                    repo_id=source, repo_type="dataset", revision=revision, allow_patterns=allow
                )
            )
        except (OSError, ValueError) as e:  # the hub's errors (not found, offline, no network) are both
            raise CorpusError(
                f"corpus.source {source!r}: no file or directory {local.resolve()}, and the hub dataset "
                f"{source}@{revision} cannot be fetched ({type(e).__name__}: {str(e).splitlines()[0]})"
            ) from None
        files = []
        for p in sorted(snap.rglob("*")):
            rel = str(p.relative_to(snap))
            if p.is_file() and data_format(p) and any(fnmatch.fnmatch(rel, a) for a in allow):
                files.append({"path": str(p), "source": config_of(rel, patterns), "format": data_format(p)})
        if not files:
            raise CorpusError(f"corpus {source}@{revision}: no data files match configs {list(configs)}")
        manifest = {
            "source": source,
            "kind": "hub",
            "revision": revision,
            "resolved_revision": snap.name,
            "configs": list(configs),
            "files": files,
        }
    for f in manifest["files"]:
        f["bytes"] = Path(f["path"]).stat().st_size
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "manifest.json", manifest)
    log.info(
        "corpus: %d file(s), %.1f MB",
        len(manifest["files"]),
        sum(f["bytes"] for f in manifest["files"]) / 1e6,
    )
    return manifest


# ---------------------------------------------------------------------------------------------
# reading raw rows


@dataclass
class RawRow:
    source: str
    row: int
    data: dict | None  # None when the line itself is unreadable
    error: str | None = None


def iter_rows(path: str | Path, fmt: str, source: str, batch_rows: int = 256) -> Iterator[list[RawRow]]:
    """Yield batches of raw rows from one file, streaming (bounded memory)."""
    if fmt == "parquet":
        return _parquet_rows(Path(path), source, batch_rows)
    if fmt == "jsonl":
        return _jsonl_rows(Path(path), source, batch_rows)
    raise CorpusError(f"corpus file {path}: unsupported format {fmt!r}")


def _parquet_rows(path: Path, source: str, batch_rows: int) -> Iterator[list[RawRow]]:
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise CorpusError(f"corpus file {path}: not a readable parquet file ({e})") from None
    names = pf.schema_arrow.names
    if "conversations" not in names:
        raise CorpusError(
            f"corpus file {path}: no `conversations` column (columns: {', '.join(names)}); "
            "expected rows of conversations: [{role, content}]"
        )
    wanted = [c for c in ("conversations", "task", *METADATA_COLUMNS, "enable_thinking") if c in names]
    row = 0
    for batch in pf.iter_batches(batch_size=batch_rows, columns=wanted):
        rows = batch.to_pylist()
        yield [RawRow(source, row + i, r) for i, r in enumerate(rows)]
        row += len(rows)


def _jsonl_row(source: str, n: int, line: str) -> RawRow:
    if not line.strip():
        return RawRow(source, n, None, "empty line")
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        return RawRow(source, n, None, f"invalid JSON: {e}")
    if not isinstance(obj, dict):
        return RawRow(source, n, None, "line is not a JSON object")
    return RawRow(source, n, obj)


def _jsonl_rows(path: Path, source: str, batch_rows: int) -> Iterator[list[RawRow]]:
    opener = gzip.open if str(path).endswith(".gz") else open
    batch: list[RawRow] = []
    seen_key = False
    n = -1
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            for n, line in enumerate(fh):
                raw = _jsonl_row(source, n, line)
                seen_key = seen_key or (raw.data is not None and "conversations" in raw.data)
                batch.append(raw)
                if len(batch) >= batch_rows:
                    yield batch
                    batch = []
    except (UnicodeDecodeError, OSError, EOFError) as e:
        raise CorpusError(f"corpus file {path}: not a readable jsonl file ({e})") from None
    if batch:
        yield batch
    if n >= 0 and not seen_key:  # any line at all (a one-line file too), and none is a trajectory
        raise CorpusError(
            f"corpus file {path}: no row has a `conversations` key; expected rows of conversations: [{{role, content}}]"
        )
