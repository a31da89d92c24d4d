"""Trajectory quality before training: the Targeted Observation Ratio (TOR) and the corpus statistics.

TOR is **our reconstruction** (Terminal-Lego names the measure and gives no formula):

- every command of every assistant turn is parsed (horizon.data.commands); the unit is a pipeline;
- an *observation* is a pipeline made only of commands that read the environment
  (`quality.observation_commands`) and writes no file; an *action* is any other pipeline, and a
  command line that cannot be parsed counts as an action; keystrokes that run no command (`C-c`,
  answers to a program's question) are neither;
- the *screens* of a trajectory are the harness's replies to its commands (user turns after the
  first, except the replies to an unparseable answer), with prompt lines and echoed input removed;
- an action is *targeted* when one of its arguments (a path's file name, a file name, a port or
  number of at least two digits, an identifier of at least `quality.min_identifier` characters)
  appeared in a screen returned earlier in the same trajectory;
- TOR = targeted actions / actions (NaN when a trajectory has no action).

One streaming pass over the normalized corpus (no tokenizer) writes one row per trajectory to
quality.parquet and the corpus statistics (turns, commands, categories, TOR distribution) to
statistics.json; memory holds one batch plus the command-name counts.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from horizon.data.commands import OBSERVATION_COMMANDS, ends_with_question, parse_keystrokes
from horizon.io import atomic_path, iter_batches, read_json, write_json
from horizon.progress import Progress
from horizon.terminus import ParseError, parse_response

log = logging.getLogger("horizon.data.quality")

QUALITY_SCHEMA = pa.schema(
    [
        ("traj_id", pa.string()),
        ("task", pa.string()),
        ("source", pa.string()),
        ("n_turns", pa.int32()),
        ("n_steps", pa.int32()),  # assistant turns
        ("n_unparseable", pa.int32()),  # assistant turns the harness could not parse
        ("n_observations", pa.int32()),
        ("n_actions", pa.int32()),
        ("n_targeted", pa.int32()),
        ("n_unparsed", pa.int32()),  # command lines shlex could not read (counted as actions)
        ("n_keys", pa.int32()),  # keystrokes that run no command
        ("chars", pa.int64()),
        ("tor", pa.float64()),
    ]
)
TOKEN = re.compile(r"\.?[\w~-]+(?:\.[\w~-]+)*")
PROMPT_LINE = re.compile(
    r"^(?:\([^)\n]*\)\s*)?(?:[\w.-]+@[\w.-]+:[^\n#$]*|(?:ba)?sh-[\d.]+)[#$](?: .*)?$\n?", re.M
)
STOP_WORDS = frozenset("the and for with not you are this that from was has have but all any can".split())
TOR_BINS = 20


_TOKEN_CHAR = re.compile(r"[\w~-]")


def seen_in(key: str, screen: str, typed_lines: bool) -> bool:
    """`key` is a whole token of the screen (what TOKEN would find there), outside prompt lines (the
    echo of typed commands) and, after multi-line input, outside `> ` continuation lines.

    Searching for the few argument keys is much faster than tokenizing every screen."""
    pos = screen.find(key)
    while pos >= 0:
        end = pos + len(key)
        before = screen[pos - 1] if pos else " "
        after = screen[end : end + 2]
        whole = not (_TOKEN_CHAR.match(before) or before == ".") and not (
            after
            and (_TOKEN_CHAR.match(after[0]) or (after[0] == "." and _TOKEN_CHAR.match(after[1:2] or " ")))
        )
        if whole:
            line = screen[
                screen.rfind("\n", 0, pos) + 1 : (screen.find("\n", end) + 1 or len(screen) + 1) - 1
            ]
            if not PROMPT_LINE.match(line) and not (typed_lines and line.startswith("> ")):
                return True
        pos = screen.find(key, pos + 1)
    return False


def argument_keys(word: str, min_len: int) -> list[str]:
    """What of an argument can have been seen: a path's file name, numbers, identifiers."""
    if any(c.isspace() for c in word):
        parts = TOKEN.findall(word)  # a quoted string or inline code: every identifier in it
    else:
        parts = TOKEN.findall(word.rstrip("/").rsplit("/", 1)[-1])
    return [
        p
        for p in parts
        if (p.isdigit() and len(p) >= 2) or (not p.isdigit() and len(p) >= min_len and p not in STOP_WORDS)
    ]


class TrajectoryQuality:
    """Counts of one trajectory, filled turn by turn; whether an action is targeted is decided at
    the end, from the screens before its turn."""

    def __init__(self, observe: frozenset[str], min_len: int):
        self.observe, self.min_len = observe, min_len
        self.screens: list[tuple[int, str, bool]] = []  # (turn index, text, after multi-line input)
        self.actions: list[tuple[int, list[str]]] = []  # (turn index, argument keys)
        self.first_seen: dict[str, int] = {}
        self.n = Counter()
        self.names: Counter[str] = Counter()

    def screen(self, turn: int, text: str, typed_lines: bool) -> None:
        self.screens.append((turn, text, typed_lines))

    def turn(self, index: int, keystrokes: Sequence[str], after_question: bool) -> None:
        for j, ks in enumerate(keystrokes):
            for u in parse_keystrokes(ks, self.observe, after_question and j == 0):
                if u.kind in ("key", "input"):
                    self.n["keys"] += 1
                    continue
                self.names.update(u.names)
                if u.kind == "observation":
                    self.n["observations"] += 1
                    continue
                self.n["actions"] += 1
                self.n["unparsed"] += u.unparsed
                self.actions.append((index, [k for w in u.words for k in argument_keys(w, self.min_len)]))

    def seen_before(self, key: str, turn: int) -> bool:
        if key not in self.first_seen:
            self.first_seen[key] = next(
                (t for t, text, typed in self.screens if seen_in(key, text, typed)), math.inf
            )
        return self.first_seen[key] < turn

    def targeted(self) -> int:
        return sum(1 for turn, keys in self.actions if any(self.seen_before(k, turn) for k in keys))


def trajectory_quality(
    conversation: Sequence[Mapping[str, str]], observe: frozenset[str], min_len: int = 3
) -> tuple[dict, Counter]:
    """(counts and TOR of one trajectory, its command names)."""
    q = TrajectoryQuality(observe, min_len)
    parsed, typed_lines, last_screen, steps, unparseable = True, False, "", 0, 0
    for i, turn in enumerate(conversation):
        content = turn["content"]
        if turn["role"] == "user":
            if i > 0 and parsed:  # the first turn is the task; a parse-error reply shows no screen
                q.screen(i, content, typed_lines)
                last_screen = content
            continue
        steps += 1
        try:
            keystrokes = [c.keystrokes for c in parse_response(content).commands]
        except ParseError:
            parsed, unparseable = False, unparseable + 1
            continue
        parsed = True
        q.turn(i, keystrokes, ends_with_question(last_screen))
        typed_lines = any("\n" in k.strip() for k in keystrokes)
    actions, targeted = q.n["actions"], q.targeted()
    row = {
        "n_turns": len(conversation),
        "n_steps": steps,
        "n_unparseable": unparseable,
        "n_observations": q.n["observations"],
        "n_actions": actions,
        "n_targeted": targeted,
        "n_unparsed": q.n["unparsed"],
        "n_keys": q.n["keys"],
        "chars": sum(len(t["content"]) for t in conversation),
        "tor": targeted / actions if actions else math.nan,
    }
    return row, q.names


# ---------------------------------------------------------------------------------------------
# corpus statistics (bounded memory: histograms and counters, no per-trajectory list)

FINE_BINS = 1000  # TOR quantiles to 0.001


def hist_quantile(hist: Mapping[float, int], q: float) -> float:
    """The q-quantile (lower) of values given as {value: count}."""
    total = sum(hist.values())
    if not total:
        return math.nan
    rank, acc = q * (total - 1), 0
    for value in sorted(hist):
        acc += hist[value]
        if acc > rank:
            return float(value)
    return float(max(hist))


class CorpusStatistics:
    """Running statistics of a corpus: one `add` per trajectory."""

    def __init__(self):
        self.steps: Counter[int] = Counter()
        self.tor: Counter[float] = Counter()  # TOR rounded to 1/FINE_BINS
        self.names: Counter[str] = Counter()
        self.categories: Counter[str] = Counter()
        self.totals: Counter[str] = Counter()
        self.tor_sum = self.tor_sq = 0.0

    def add(self, row: Mapping, names: Counter, category: str | None) -> None:
        self.totals["trajectories"] += 1
        for k in ("n_observations", "n_actions", "n_targeted", "n_unparsed", "n_keys", "chars"):
            self.totals[k] += row[k]
        self.steps[row["n_steps"]] += 1
        self.names.update(names)
        self.categories[category or "(none)"] += 1
        if not math.isnan(row["tor"]):
            self.tor[round(row["tor"] * FINE_BINS) / FINE_BINS] += 1
            self.tor_sum += row["tor"]
            self.tor_sq += row["tor"] ** 2

    def _tor(self) -> dict:
        n = sum(self.tor.values())
        mean = self.tor_sum / n if n else math.nan
        sd = math.sqrt(max(self.tor_sq / n - mean**2, 0.0) * n / (n - 1)) if n > 1 else math.nan
        counts = [0] * TOR_BINS
        for v, c in self.tor.items():
            counts[min(int(v * TOR_BINS), TOR_BINS - 1)] += c
        return {
            "trajectories": n,
            "without_action": self.totals["trajectories"] - n,
            "mean": mean,
            "sd": sd,
            **{f"p{int(q * 100)}": hist_quantile(self.tor, q) for q in (0.1, 0.25, 0.5, 0.75, 0.9)},
            "histogram": counts,
        }

    def summary(self, top: int = 20) -> dict:
        t, n = self.totals, self.totals["trajectories"]
        n_cmd = sum(self.names.values())
        return {
            "trajectories": n,
            "steps": {
                "mean": sum(k * v for k, v in self.steps.items()) / n if n else math.nan,
                "median": hist_quantile(self.steps, 0.5),
                "p90": hist_quantile(self.steps, 0.9),
                "max": max(self.steps, default=0),
                "histogram": {str(k): v for k, v in sorted(self.steps.items())},
            },
            "chars": {"total": t["chars"], "mean": t["chars"] / n if n else math.nan},
            "commands": {
                "total": n_cmd,
                "distinct": len(self.names),
                "top": [[c, k, k / n_cmd] for c, k in self.names.most_common(top)],
                **{
                    k[2:]: t[k] for k in ("n_observations", "n_actions", "n_targeted", "n_unparsed", "n_keys")
                },
            },
            "categories": [[c, k] for c, k in self.categories.most_common()],
            "tor": self._tor(),
        }


def completion(normalize_stats: Mapping) -> dict:
    rows = normalize_stats["rows"]
    return {
        "rows": rows,
        "completed": normalize_stats["completed"],
        "duplicates": normalize_stats["duplicates"],
        "quarantined": normalize_stats["quarantined"],
        "rate": normalize_stats["completed"] / rows if rows else math.nan,
    }


def iter_conversations(path: str | Path, batch_rows: int = 64) -> Iterable[dict]:
    """Rows of a trajectories parquet (traj_id, task, source, conversations), one batch in memory."""
    for batch in iter_batches(path, ["traj_id", "task", "source", "conversations"], batch_rows):
        yield from batch.to_pylist()


def write_quality(
    trajectories: str | Path,
    normalize_stats: str | Path,
    out_path: str | Path,
    stats_path: str | Path,
    observation_commands: Sequence[str] = OBSERVATION_COMMANDS,
    min_identifier: int = 3,
    batch_rows: int = 64,
) -> dict:
    """quality.parquet (one row per trajectory) and statistics.json, in one streaming pass."""
    observe = frozenset(observation_commands)
    stats = CorpusStatistics()
    total = pq.ParquetFile(trajectories).metadata.num_rows
    progress = Progress("quality (TOR, statistics)", total, "trajectories", logger=log)
    with atomic_path(out_path) as tmp:
        writer = pq.ParquetWriter(tmp, QUALITY_SCHEMA, compression="zstd")
        buf: list[dict] = []
        for r in iter_conversations(trajectories, batch_rows):
            row, names = trajectory_quality(r["conversations"], observe, min_identifier)
            stats.add(row, names, r["source"])
            buf.append({"traj_id": r["traj_id"], "task": r["task"], "source": r["source"], **row})
            if len(buf) >= 256:
                writer.write_table(pa.Table.from_pylist(buf, schema=QUALITY_SCHEMA))
                buf = []
            progress.update(1)
        writer.write_table(pa.Table.from_pylist(buf, schema=QUALITY_SCHEMA))
        writer.close()
    progress.close()
    summary = {**stats.summary(), "completion": completion(read_json(normalize_stats))}
    summary["settings"] = {"observation_commands": sorted(observe), "min_identifier": min_identifier}
    write_json(stats_path, summary)
    tor = summary["tor"]
    log.info(
        "quality: %d trajectories, TOR mean %.3f (%d without an action), %d distinct commands",
        summary["trajectories"],
        tor["mean"],
        tor["without_action"],
        summary["commands"]["distinct"],
    )
    return summary
