"""Decontamination: training trajectories that share word n-grams with a benchmark's tasks.

Words are normalized the same way on both sides: lower-case, split at everything that is not a
letter, digit or underscore (punctuation and line breaks only separate words, so re-wrapped lines,
changed case and changed punctuation still match). A trajectory is contaminated by a benchmark when
it shares at least `min_matches` distinct n-grams (n = 13 by default) with one of its tasks.

Speed and memory: n-grams are hashed to 64 bits with numpy (a polynomial hash of each word's bytes,
then of each run of n word hashes, n vectorized passes), every step a pass over a chunk of a quarter
megabyte of text. The reference side is a sorted array of hashes (8 bytes per
n-gram plus a task index: a few MB for hundreds of tasks); the corpus side streams through in
chunks, so memory does not grow with the corpus. A hash collision can only add a match, never hide
one (2^-64 per pair).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from horizon.io import iter_batches, read_json, write_json, write_table
from horizon.progress import Progress

log = logging.getLogger("horizon.data.decontam")

_WORD_BYTES = np.zeros(256, dtype=bool)
for _c in b"abcdefghijklmnopqrstuvwxyz0123456789_":
    _WORD_BYTES[_c] = True
_WORD_BYTES[0x80:] = True  # bytes of non-ASCII letters (text that is not ASCII is pre-cleaned below)
_LOWER = np.arange(256, dtype=np.uint8)
_LOWER[65:91] += 32
_UNICODE_WORD = re.compile(r"\w+")
_P = np.uint64(0x9E3779B97F4A7C15)
_Q = np.uint64(0xC2B2AE3D27D4EB4F)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: spreads the polynomial hashes over all 64 bits."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def _powers(base: np.uint64, n: int) -> np.ndarray:
    """base^0 .. base^(n-1) modulo 2^64."""
    with np.errstate(over="ignore"):
        return np.concatenate((np.ones(1, np.uint64), np.cumprod(np.full(max(n - 1, 0), base, np.uint64))))


class _BytePowers:
    """P^i and P^-i for the positions of a chunk (sized to the largest chunk seen; texts are cut to
    chunks of at most a few hundred KB, so this stays small)."""

    def __init__(self):
        self.pw = self.ipw = np.ones(1, np.uint64)
        self.lock = threading.Lock()

    def get(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        with self.lock:
            if len(self.pw) < n:
                size = int(n * 1.25)
                self.pw, self.ipw = _powers(_P, size), _powers(np.uint64(pow(int(_P), -1, 1 << 64)), size)
            return self.pw[:n], self.ipw[:n]


_BYTE_POWERS = _BytePowers()


def normalize(text: str) -> str:
    """Text whose words are exactly its \\w+ runs: ASCII as is (lower-cased later, per byte), other
    text rebuilt from its lower-cased \\w+ runs."""
    return text if text.isascii() else " ".join(_UNICODE_WORD.findall(text.lower()))


@dataclass
class Chunk:
    """Hashed n-grams of a list of texts: ngram hash, the text it belongs to, its first word."""

    hashes: np.ndarray  # uint64
    text: np.ndarray  # int64 index into the chunk's texts
    word: np.ndarray  # int64 index of the n-gram's first word (into starts/ends)
    starts: np.ndarray
    ends: np.ndarray
    data: np.ndarray  # the normalized bytes

    def ngram_text(self, i: int, n: int) -> str:
        """The i-th n-gram as normalized words."""
        w = int(self.word[i])
        spans = zip(self.starts[w : w + n], self.ends[w : w + n])
        return " ".join(self.data[s:e].tobytes().decode("utf-8", "replace") for s, e in spans)


def _word_hashes(b: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """A polynomial hash of each word's bytes, from one prefix sum over the chunk."""
    pw, ipw = _BYTE_POWERS.get(len(b))
    prefix = np.zeros(len(b) + 1, np.uint64)
    with np.errstate(over="ignore"):
        np.multiply(b, pw, out=prefix[1:], dtype=np.uint64)
        np.cumsum(prefix, out=prefix)
        return _mix((prefix[ends] - prefix[starts]) * ipw[starts] + (ends - starts).astype(np.uint64))


def hash_ngrams(texts: Sequence[str], n: int) -> Chunk:
    """Every n-gram of words inside each text (never across two texts), hashed."""
    b = _LOWER[np.frombuffer("\0".join(normalize(t) for t in texts).encode("utf-8"), dtype=np.uint8)]
    is_word = np.concatenate(([False], _WORD_BYTES[b], [False]))
    edges = np.flatnonzero(is_word[1:] != is_word[:-1])  # alternately a word's start and its end
    starts, ends = edges[0::2], edges[1::2]
    text_of = np.searchsorted(np.flatnonzero(b == 0), starts)
    words = _word_hashes(b, starts, ends)
    m = max(len(words) - n + 1, 0)
    grams = np.zeros(m, np.uint64)
    with np.errstate(over="ignore"):
        for j in range(n):  # Horner over the n words of every window at once
            np.multiply(grams, _Q, out=grams)
            np.add(grams, words[j : j + m], out=grams)
    k = np.arange(m)
    inside = text_of[k] == text_of[k + n - 1] if m else np.zeros(0, dtype=bool)
    return Chunk(_mix(grams[inside]), text_of[k][inside], k[inside], starts, ends, b)


# ---------------------------------------------------------------------------------------------
# the reference side: the benchmarks' task texts


class DecontamError(ValueError):
    """The check cannot run (a benchmark without task text, a bad template); the message names it."""


@dataclass
class Reference:
    """Sorted n-gram hashes of every reference task (a hash shared by two tasks appears twice)."""

    n: int
    hashes: np.ndarray  # uint64, sorted
    task: np.ndarray  # int32: index into `tasks`
    tasks: list[tuple[str, str]]  # (benchmark, task id)
    bits: np.ndarray = field(default=None, repr=False)  # a bit per value of a hash's low k bits

    def __post_init__(self):
        # a direct-mapped prefilter: a bit test per corpus n-gram rejects ~99% of them before the
        # binary search; packed bits (64 per reference n-gram) stay in the CPU's cache
        k = int(np.clip(np.ceil(np.log2(max(len(self.hashes), 1) * 64)), 16, 30))
        self.mask = np.uint64((1 << k) - 1)
        present = np.zeros(1 << k, dtype=bool)
        present[self.hashes & self.mask] = True
        self.bits = np.packbits(present, bitorder="little")

    @property
    def nbytes(self) -> int:
        return self.hashes.nbytes + self.task.nbytes + self.bits.nbytes

    def lookup(self, grams: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(indices into grams, first and end rows in `hashes`) of the n-grams in the reference."""
        low = grams & self.mask
        cand = np.flatnonzero((self.bits[low >> np.uint64(3)] >> (low & np.uint64(7)).astype(np.uint8)) & 1)
        lo = np.searchsorted(self.hashes, grams[cand], "left")
        hi = np.searchsorted(self.hashes, grams[cand], "right")
        hit = hi > lo
        return cand[hit], lo[hit], hi[hit]


def build_reference(texts: Sequence[tuple[str, str, str]], n: int) -> Reference:
    """texts: (benchmark, task id, text), several texts per task allowed (instruction, solution...)."""
    tasks = list(dict.fromkeys((b, t) for b, t, _ in texts))
    index = {bt: i for i, bt in enumerate(tasks)}
    chunk = hash_ngrams([x for _, _, x in texts], n)
    task_of_text = np.array([index[(b, t)] for b, t, _ in texts], dtype=np.int32)
    pairs = np.unique(np.rec.fromarrays([chunk.hashes, task_of_text[chunk.text]], names="h,t"))
    return Reference(n, pairs["h"].astype(np.uint64), pairs["t"].astype(np.int32), tasks)


# ---------------------------------------------------------------------------------------------
# the corpus side


@dataclass
class Hit:
    """A trajectory that shares n-grams with a reference task."""

    traj: int  # index into the chunk's trajectories
    task: int  # index into Reference.tasks
    shared: int  # distinct shared n-grams
    first: str  # the first shared n-gram (normalized words)


OVERLAP = 4096  # characters two pieces of a cut text share: more than n words of any sane text
MAX_PIECE = 1 << 20  # characters hashed at once (bounds the numpy arrays of one call)


def pieces(texts: Sequence[str], owners: Sequence[int], size: int = MAX_PIECE) -> list[tuple[int, str]]:
    """(owner, text) with every text longer than `size` cut into overlapping windows, so that no
    n-gram is lost at a cut (a shared n-gram counts once: they are counted as distinct hashes)."""
    out = []
    for owner, t in zip(owners, texts):
        step = size - OVERLAP
        out += [(owner, t[i : i + size]) for i in range(0, max(len(t) - OVERLAP, 1), step)]
    return out


def _hits(ref: Reference, chunk: Chunk, owner: np.ndarray) -> list[tuple[int, int, int, int]]:
    """(owner, task, hash, n-gram index) of every corpus n-gram found in the reference."""
    which, lo, hi = ref.lookup(chunk.hashes)
    counts = hi - lo
    gram = np.repeat(which, counts)  # one row per (corpus n-gram, reference task)
    ref_row = np.arange(len(gram)) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(lo, counts)
    return list(
        zip(
            owner[chunk.text[gram]].tolist(),
            ref.task[ref_row].tolist(),
            chunk.hashes[gram].tolist(),
            gram.tolist(),
        )
    )


def match(ref: Reference, texts: Sequence[str], traj_of_text: Sequence[int]) -> list[Hit]:
    """The (trajectory, task) pairs among `texts` that share n-grams, with their counts and the first one."""
    found: dict[tuple[int, int], tuple[set, tuple]] = {}
    group: list[tuple[int, str]] = []
    cut, size = pieces(texts, traj_of_text), 0
    for i, piece in enumerate(cut):
        group.append(piece)
        size += len(piece[1])
        if i + 1 < len(cut) and size < MAX_PIECE:
            continue
        chunk = hash_ngrams([t for _, t in group], ref.n)
        for owner, task, h, g in _hits(ref, chunk, np.asarray([o for o, _ in group], dtype=np.int64)):
            hashes, first = found.setdefault((owner, task), (set(), (i, g, chunk)))
            hashes.add(h)
        group, size = [], 0
    return [Hit(a, b, len(hs), c.ngram_text(g, ref.n)) for (a, b), (hs, (_, g, c)) in sorted(found.items())]


TASK_MARKERS = ("Task Description:", "Current terminal state:")  # the Terminus-2 harness's first turn
FIELD_FILES = {  # text files of a task directory per decontam.fields entry (Harbor, then TB1 layout)
    "solution": ("solution", "solution.sh"),
    "tests": ("tests", "run-tests.sh"),
}
TEXT_SUFFIXES = (".sh", ".py", ".md", ".txt", ".yaml", ".yml", ".json", ".toml", "")


def _task_files(task_dir: Path, field: str) -> list[Path]:
    out = []
    for name in FIELD_FILES[field]:
        p = task_dir / name
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            out += sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in TEXT_SUFFIXES)
    return [f for f in out if f.stat().st_size <= 1 << 20]


def reference_texts(manifests: Mapping[str, str | Path], fields: Sequence[str]) -> list[tuple[str, str, str]]:
    """(benchmark, task id, text) for every task of every benchmark manifest (the benchmark rule's tasks.json)."""
    texts = []
    for bench, path in manifests.items():
        for task in read_json(path)["tasks"]:
            if "instruction" in fields and (task.get("instruction") or "").strip():
                texts.append((bench, task["id"], task["instruction"]))
            for kind in (f for f in fields if f != "instruction"):
                for f in _task_files(Path(task["path"]), kind):
                    texts.append((bench, task["id"], f.read_text(errors="replace")))
    return texts


def check_reference(ref: Reference, texts, manifests: Mapping[str, str | Path], fields) -> dict:
    """Per benchmark: tasks, n-grams, tasks too short to match; a benchmark without any is an error."""
    per_bench = {}
    grams = np.bincount(ref.task, minlength=len(ref.tasks))
    for bench, path in manifests.items():
        ids = [t["id"] for t in read_json(path)["tasks"]]
        idx = [i for i, (b, _) in enumerate(ref.tasks) if b == bench]
        if not idx or not grams[idx].sum():
            raise DecontamError(
                f"decontaminate: benchmark {bench!r} ({path}) has no task text of {ref.n} words or more "
                f"in decontam.fields {list(fields)}: nothing to check the corpus against"
            )
        short = [ref.tasks[i][1] for i in idx if not grams[i]] + [
            t for t in ids if (bench, t) not in ref.tasks
        ]
        per_bench[bench] = {
            "tasks": len(ids),
            "ngrams": int(grams[idx].sum()),
            "tasks_too_short": sorted(short),
        }
    return per_bench


class TaskStatement:
    """The task part of a first user turn: by the prompt template's form, else the harness markers."""

    def __init__(self, template: str | Path | None):
        self.form = None
        if template:
            import yaml

            initial = (yaml.safe_load(Path(template).read_text()) or {}).get("initial") or ""
            if "{instruction}" not in initial or "{screen}" not in initial:
                raise DecontamError(
                    f"prompt template {template}: `initial` lacks {{instruction}} or {{screen}}"
                )
            head, rest = initial.split("{instruction}", 1)
            self.form = re.compile(re.escape(head) + r"(.*?)" + re.escape(rest.split("{screen}", 1)[0]), re.S)
        self.markers = re.compile(re.escape(TASK_MARKERS[0]) + r"(.*?)" + re.escape(TASK_MARKERS[1]), re.S)
        self.how: Counter[str] = Counter()

    def __call__(self, first_turn: str) -> str:
        for how, pattern in (("template", self.form), ("markers", self.markers)):
            m = pattern.search(first_turn) if pattern else None
            if m:
                self.how[how] += 1
                return m.group(1)
        self.how["whole_first_turn"] += 1
        return first_turn


DECONTAM_SCHEMA = pa.schema(
    [
        ("traj_id", pa.string()),
        ("task", pa.string()),  # the trajectory's own task id
        ("benchmark", pa.string()),
        ("bench_task", pa.string()),  # the benchmark task it shares the most n-grams with
        ("shared_ngrams", pa.int32()),
        ("first_ngram", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
    ]
)
CORPUS_TEXTS = ("task", "all")


def corpus_texts(conversation: Sequence[Mapping[str, str]], mode: str, statement: TaskStatement) -> list[str]:
    """What of a trajectory is checked: its task statement, or every turn."""
    if mode == "all":
        return [m["content"] for m in conversation]
    return [statement(conversation[0]["content"])] if conversation else []


class _Scan:
    """Chunks of whole trajectories through `match`, `workers` chunks at a time (numpy releases the
    GIL in its passes); keeps the flagged rows only, in corpus order."""

    def __init__(self, ref: Reference, min_matches: int, chunk_bytes: int, workers: int):
        self.ref, self.min_matches, self.chunk_bytes = ref, min_matches, chunk_bytes
        self.texts, self.owner, self.meta, self.size = [], [], [], 0
        self.rows: list[dict] = []
        self.chars = self.trajectories = 0
        self.pool, self.workers = ThreadPoolExecutor(workers), workers
        self.pending: list[Future] = []

    def add(self, traj_id: str, task: str | None, texts: list[str]) -> None:
        self.meta.append((traj_id, task))
        self.texts += texts
        self.owner += [len(self.meta) - 1] * len(texts)
        size = sum(map(len, texts))
        self.size += size
        self.chars += size
        self.trajectories += 1
        if self.size >= self.chunk_bytes:
            self.flush()

    def flush(self, wait_all: bool = False) -> None:
        if self.texts:
            self.pending.append(self.pool.submit(self._flagged, self.texts, self.owner, self.meta))
        self.texts, self.owner, self.meta, self.size = [], [], [], 0
        while self.pending and (wait_all or len(self.pending) > 2 * self.workers):
            self.rows += self.pending.pop(0).result()
        if wait_all:
            self.pool.shutdown()

    def _flagged(self, texts: list[str], owner: list[int], meta: list[tuple]) -> list[dict]:
        best: dict[tuple[int, str], Hit] = {}
        for h in match(self.ref, texts, owner):
            key = (h.traj, self.ref.tasks[h.task][0])
            if key not in best or h.shared > best[key].shared:
                best[key] = h
        rows, n = [], self.ref.n
        for (traj, bench), h in sorted(best.items()):
            if h.shared >= self.min_matches:
                bench_task = self.ref.tasks[h.task][1]
                rows.append(
                    {
                        "traj_id": meta[traj][0],
                        "task": meta[traj][1],
                        "benchmark": bench,
                        "bench_task": bench_task,
                        "shared_ngrams": h.shared,
                        "first_ngram": h.first,
                        "reason": "contaminated",
                        "detail": f"{bench}/{bench_task}: {h.shared} shared {n}-grams",
                    }
                )
        return rows


def decontaminate(
    trajectories: str | Path,
    manifests: Mapping[str, str | Path],
    out_path: str | Path,
    stats_path: str | Path,
    n: int = 13,
    min_matches: int = 1,
    fields: Sequence[str] = ("instruction",),
    corpus_text: str = "task",
    template: str | Path | None = None,
    chunk_bytes: int = 1 << 18,
    workers: int = 2,
) -> dict:
    """decontamination.parquet (one row per contaminated trajectory and benchmark) and its counts."""
    if corpus_text not in CORPUS_TEXTS:
        raise DecontamError(f"decontam.corpus_text: {corpus_text!r} (allowed: {', '.join(CORPUS_TEXTS)})")
    t0 = time.perf_counter()
    texts = reference_texts(manifests, fields)
    ref = build_reference(texts, n)
    per_bench = check_reference(ref, texts, manifests, fields)
    statement = TaskStatement(template if corpus_text == "task" else None)
    scan = _Scan(ref, min_matches, chunk_bytes, workers)
    pf = pq.ParquetFile(trajectories)
    progress = Progress("decontaminate", pf.metadata.num_rows, "trajectories", logger=log)
    for batch in iter_batches(trajectories, ["traj_id", "task", "conversations"]):
        for r in batch.to_pylist():
            scan.add(r["traj_id"], r["task"], corpus_texts(r["conversations"], corpus_text, statement))
        progress.update(batch.num_rows)
    scan.flush(wait_all=True)
    progress.close()
    write_table(out_path, pa.Table.from_pylist(scan.rows, schema=DECONTAM_SCHEMA))
    seconds = time.perf_counter() - t0
    for bench in per_bench:
        per_bench[bench]["flagged"] = sum(1 for r in scan.rows if r["benchmark"] == bench)
    stats = {
        "n": n,
        "min_matches": min_matches,
        "fields": list(fields),
        "corpus_text": corpus_text,
        "trajectories": scan.trajectories,
        "flagged": len({r["traj_id"] for r in scan.rows}),
        "benchmarks": per_bench,
        "task_statement": dict(statement.how),
        "reference_bytes": ref.nbytes,
        "chars": scan.chars,
        "seconds": seconds,
        "mb_per_s": scan.chars / 1e6 / seconds if seconds else None,
    }
    write_json(stats_path, stats)
    log.info(
        "decontaminate: %d of %d trajectories share a %d-gram with a benchmark task (%s); %.1f MB/s",
        stats["flagged"],
        scan.trajectories,
        n,
        {b: v["flagged"] for b, v in per_bench.items()},
        stats["mb_per_s"] or 0,
    )
    return stats
