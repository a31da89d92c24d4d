"""The teacher corpus: download (or locate) the raw files, then normalize them into trajectories.

normalize streams the raw files batch by batch (the real corpus is 8.2 GB), keeps the completed
trajectories once each, and puts every other row in quarantine with a reason, so that
rows = completed + duplicates + sum(quarantined) always holds.
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import json
import logging
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from horizon.io import atomic_path, write_json
from horizon.terminus import ParseError, parse_response

log = logging.getLogger("horizon.corpus")

DATA_SUFFIXES = (".parquet", ".jsonl", ".jsonl.gz")
METADATA_COLUMNS = ("agent", "model", "model_provider", "date", "episode", "run_id", "trial_name")
MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
TRAJECTORY_SCHEMA = pa.schema(
    [
        ("traj_id", pa.string()),
        ("task", pa.string()),
        ("source", pa.string()),
        ("source_row", pa.int64()),
        ("conversations", pa.list_(MESSAGE)),
        ("n_turns", pa.int32()),
        *[(c, pa.string()) for c in METADATA_COLUMNS],
        ("enable_thinking", pa.bool_()),
    ]
)
QUARANTINE_SCHEMA = pa.schema(
    [
        ("source", pa.string()),
        ("row", pa.int64()),
        ("task", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
    ]
)


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

        snap = Path(
            snapshot_download(repo_id=source, repo_type="dataset", revision=revision, allow_patterns=allow)
        )
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
    path = Path(path)
    if fmt == "parquet":
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
    elif fmt == "jsonl":
        opener = gzip.open if str(path).endswith(".gz") else open
        batch: list[RawRow] = []
        seen_key = False
        n = 0
        try:
            with opener(path, "rt", encoding="utf-8") as fh:
                for n, line in enumerate(fh):
                    if not line.strip():
                        batch.append(RawRow(source, n, None, "empty line"))
                    else:
                        try:
                            obj = json.loads(line)
                        except json.JSONDecodeError as e:
                            batch.append(RawRow(source, n, None, f"invalid JSON: {e}"))
                        else:
                            if not isinstance(obj, dict):
                                batch.append(RawRow(source, n, None, "line is not a JSON object"))
                            else:
                                seen_key = seen_key or "conversations" in obj
                                batch.append(RawRow(source, n, obj))
                    if len(batch) >= batch_rows:
                        yield batch
                        batch = []
        except (UnicodeDecodeError, OSError, EOFError) as e:
            raise CorpusError(f"corpus file {path}: not a readable jsonl file ({e})") from None
        if batch:
            yield batch
        if n > 0 and not seen_key:
            raise CorpusError(
                f"corpus file {path}: no row has a `conversations` key; expected rows of conversations: [{{role, content}}]"
            )
    else:
        raise CorpusError(f"corpus file {path}: unsupported format {fmt!r}")


# ---------------------------------------------------------------------------------------------
# validation


def traj_id(conversations: Sequence[Mapping[str, str]]) -> str:
    """Stable content hash of a conversation (the dedup key, stable across runs and machines)."""
    canon = json.dumps(
        [[m["role"], m["content"]] for m in conversations], ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:20]


def check_row(data: Mapping[str, Any], confirmation: re.Pattern) -> tuple[str, str] | None:
    """(reason, detail) when the row is not a completed trajectory, else None."""
    conv = data.get("conversations")
    if conv is None:
        return "missing_conversations", "no `conversations` value"
    if not isinstance(conv, list):
        return "malformed_turn", f"`conversations` is a {type(conv).__name__}, not a list"
    if not conv:
        return "empty_conversations", "`conversations` is empty"
    for i, turn in enumerate(conv):
        if not isinstance(turn, dict) or "role" not in turn or "content" not in turn:
            return "malformed_turn", f"turn {i} is not an object with `role` and `content`"
        if turn["role"] == "system":
            return "system_turn", f"turn {i} has role system (the corpus has none)"
        if turn["role"] not in ("user", "assistant"):
            return "unknown_role", f"turn {i} has role {turn['role']!r}"
        if not isinstance(turn["content"], str):
            return "null_content", f"turn {i} ({turn['role']}) has content {turn['content']!r}"
    for i, turn in enumerate(conv):
        expected = "user" if i % 2 == 0 else "assistant"
        if turn["role"] != expected:
            return "not_alternating", f"turn {i} is {turn['role']}, expected {expected}"
    if conv[-1]["role"] != "assistant":
        return "last_turn_not_assistant", "the trajectory ends with a user turn"
    try:
        last = parse_response(conv[-1]["content"])
    except ParseError as e:
        return "last_turn_unparseable", str(e)
    if not last.task_complete:
        return "not_completed", "the last assistant turn does not set task_complete: true"
    if len(conv) < 4 or not confirmation.search(conv[-2]["content"]):
        return "no_confirmation", "task_complete: true was not a reply to the harness's confirmation question"
    return None


# ---------------------------------------------------------------------------------------------
# normalize


def _str_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


def _to_bool(v: Any) -> bool | None:
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes")
    return bool(v)


class _Writer:
    """Buffered parquet writer into a temporary file (row groups of `rows`)."""

    def __init__(self, path: Path, schema: pa.Schema, rows: int):
        self.schema = schema
        self.rows = rows
        self.buf: list[dict] = []
        self.writer = pq.ParquetWriter(path, schema, compression="zstd")

    def add(self, row: dict) -> None:
        self.buf.append(row)
        if len(self.buf) >= self.rows:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.writer.write_table(pa.Table.from_pylist(self.buf, schema=self.schema))
            self.buf = []

    def close(self) -> None:
        self.flush()
        self.writer.close()


def normalize(
    manifest_path: str | Path,
    trajectories_path: str | Path,
    quarantine_path: str | Path,
    stats_path: str | Path,
    confirmation_pattern: str = "mark the task as complete",
    batch_rows: int = 256,
) -> dict:
    """Stream every raw row into trajectories (completed, once each) or quarantine (with a reason)."""
    with open(manifest_path) as fh:
        manifest = json.load(fh)
    confirmation = re.compile(confirmation_pattern)
    counts: Counter[str] = Counter()
    per_file = []
    seen: set[str] = set()  # traj_ids so far: 20 hex chars each, ~100 B per row in all
    rows = completed = duplicates = 0
    with atomic_path(trajectories_path) as t_tmp, atomic_path(quarantine_path) as q_tmp:
        traj = _Writer(t_tmp, TRAJECTORY_SCHEMA, batch_rows)
        quar = _Writer(q_tmp, QUARANTINE_SCHEMA, 4096)
        for f in manifest["files"]:
            f_rows = f_done = 0
            for batch in iter_rows(f["path"], f["format"], f["source"], batch_rows):
                for raw in batch:
                    rows += 1
                    f_rows += 1
                    data = raw.data or {}
                    task = _str_or_none(data.get("task"))
                    if raw.data is None:
                        reason: tuple[str, str] | None = ("unreadable_row", raw.error or "unreadable")
                    else:
                        reason = check_row(data, confirmation)
                    if reason is not None:
                        counts[reason[0]] += 1
                        quar.add(
                            {
                                "source": raw.source,
                                "row": raw.row,
                                "task": task,
                                "reason": reason[0],
                                "detail": reason[1],
                            }
                        )
                        continue
                    conv = [{"role": m["role"], "content": m["content"]} for m in data["conversations"]]
                    tid = traj_id(conv)
                    if tid in seen:
                        duplicates += 1
                        continue
                    seen.add(tid)
                    completed += 1
                    f_done += 1
                    traj.add(
                        {
                            "traj_id": tid,
                            "task": task,
                            "source": raw.source,
                            "source_row": raw.row,
                            "conversations": conv,
                            "n_turns": len(conv),
                            **{c: _str_or_none(data.get(c)) for c in METADATA_COLUMNS},
                            "enable_thinking": _to_bool(data.get("enable_thinking")),
                        }
                    )
            per_file.append({"source": f["source"], "rows": f_rows, "completed": f_done})
            log.info("%s: %d rows, %d completed", f["source"], f_rows, f_done)
        traj.close()
        quar.close()
        quarantined = dict(sorted(counts.items()))
        if rows != completed + duplicates + sum(quarantined.values()):  # pragma: no cover - invariant
            raise RuntimeError("row accounting does not add up; refusing to write a lossy corpus")
        stats = {
            "rows": rows,
            "completed": completed,
            "duplicates": duplicates,
            "quarantined": quarantined,
            "files": per_file,
        }
        write_json(stats_path, stats)
    log.info(
        "normalize: %d rows -> %d completed, %d duplicates, %s quarantined",
        rows,
        completed,
        duplicates,
        quarantined,
    )
    return stats
