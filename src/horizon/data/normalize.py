"""normalize: the raw corpus rows -> completed trajectories once each, and a quarantine with reasons.

normalize streams the raw files batch by batch (the real corpus is 8.2 GB), keeps the completed
trajectories once each (`traj_id` is a content hash), and puts every other row in quarantine with
its file, row, task, reason and detail, so that rows = completed + duplicates + sum(quarantined)
always holds (stats.json).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from horizon.data.sources import METADATA_COLUMNS, RawRow, iter_rows
from horizon.io import atomic_path, write_json
from horizon.terminus import ParseError, parse_response

log = logging.getLogger("horizon.data.normalize")

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


class RowSink(Protocol):
    """Where sorted rows go: a parquet writer (normalize), or a counter (horizon check-corpus)."""

    def add(self, row: dict) -> None: ...


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


def trajectory_row(raw: RawRow, tid: str, conv: list[dict]) -> dict:
    data = raw.data
    return {
        "traj_id": tid,
        "task": _str_or_none(data.get("task")),
        "source": raw.source,
        "source_row": raw.row,
        "conversations": conv,
        "n_turns": len(conv),
        **{c: _str_or_none(data.get(c)) for c in METADATA_COLUMNS},
        "enable_thinking": _to_bool(data.get("enable_thinking")),
    }


class _Sorter:
    """Sends each raw row to trajectories (completed, first time seen) or quarantine; counts both."""

    def __init__(self, traj: RowSink, quar: RowSink, confirmation: re.Pattern):
        self.traj, self.quar, self.confirmation = traj, quar, confirmation
        self.reasons: Counter[str] = Counter()
        self.seen: set[str] = set()  # traj_ids so far: 20 hex chars each, ~100 B per row in all
        self.rows = self.completed = self.duplicates = 0

    def take(self, raw: RawRow) -> bool:
        """True when the row became a trajectory."""
        self.rows += 1
        if raw.data is None:
            reason: tuple[str, str] | None = ("unreadable_row", raw.error or "unreadable")
        else:
            reason = check_row(raw.data, self.confirmation)
        if reason is not None:
            self.reasons[reason[0]] += 1
            task = _str_or_none((raw.data or {}).get("task"))
            self.quar.add(
                {"source": raw.source, "row": raw.row, "task": task, "reason": reason[0], "detail": reason[1]}
            )
            return False
        conv = [{"role": m["role"], "content": m["content"]} for m in raw.data["conversations"]]
        tid = traj_id(conv)
        if tid in self.seen:
            self.duplicates += 1
            return False
        self.seen.add(tid)
        self.completed += 1
        self.traj.add(trajectory_row(raw, tid, conv))
        return True

    def stats(self, per_file: list[dict]) -> dict:
        quarantined = dict(sorted(self.reasons.items()))
        if self.rows != self.completed + self.duplicates + sum(quarantined.values()):  # pragma: no cover
            raise RuntimeError("row accounting does not add up; refusing to write a lossy corpus")
        return {
            "rows": self.rows,
            "completed": self.completed,
            "duplicates": self.duplicates,
            "quarantined": quarantined,
            "files": per_file,
        }


def sort_rows(
    manifest: Mapping, traj: RowSink, quar: RowSink, confirmation_pattern: str, batch_rows: int = 256
) -> dict:
    """Send every raw row of the manifest's files to `traj` (a TRAJECTORY_SCHEMA row: completed, first
    time seen) or `quar` (a QUARANTINE_SCHEMA row); return the counts (stats.json). normalize writes the
    rows; `horizon check-corpus` only counts them, with the same decisions."""
    sorter = _Sorter(traj, quar, re.compile(confirmation_pattern))
    per_file = []
    for f in manifest["files"]:
        f_rows = f_done = 0
        for batch in iter_rows(f["path"], f["format"], f["source"], batch_rows):
            f_rows += len(batch)
            f_done += sum(sorter.take(raw) for raw in batch)
        per_file.append({"source": f["source"], "rows": f_rows, "completed": f_done})
        log.info("%s: %d rows, %d completed", f["source"], f_rows, f_done)
    return sorter.stats(per_file)


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
    with atomic_path(trajectories_path) as t_tmp, atomic_path(quarantine_path) as q_tmp:
        traj = _Writer(t_tmp, TRAJECTORY_SCHEMA, batch_rows)
        quar = _Writer(q_tmp, QUARANTINE_SCHEMA, 4096)
        stats = sort_rows(manifest, traj, quar, confirmation_pattern, batch_rows)
        traj.close()
        quar.close()
        write_json(stats_path, stats)
    log.info(
        "normalize: %d rows -> %d completed, %d duplicates, %s quarantined",
        stats["rows"],
        stats["completed"],
        stats["duplicates"],
        stats["quarantined"],
    )
    return stats
