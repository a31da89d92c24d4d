"""Preference pairs: a verified success and a failure of the same task, from the policy's own attempts.

Attempts come from the preference rollouts (attempts.jsonl and transcripts/, the rollout jobs'
records). Per task, the successes S and failures F (infrastructure errors are neither: counted
and left out; so is an attempt without any assistant turn) give |S| x |F| candidate pairs, of which
`pairs_per_task` are drawn without replacement by a generator seeded with (seed, task), all of them
when there are fewer. Tasks with no success or no failure yield none, and are counted.

Each trajectory is the attempt's conversation up to its last assistant turn, serialized once by
our ChatML writer (token ids, role tags, message index per token). pairs.parquet holds one row per
pair with both trajectories; pairs.json the counts per task and in all.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from horizon.data.chatml import SUPERVISED, ChatSerializer
from horizon.data.tokens import list_array
from horizon.eval.settings import Attempt
from horizon.io import write_json, write_table

log = logging.getLogger("horizon.dmpo.pairs")

SIDES = ("chosen", "rejected")


class NoPairs(ValueError):
    """Not one (success, failure) pair: the message names the policy, the task set and the counts."""


def assistant_turn_ids(roles: np.ndarray, turns: np.ndarray) -> np.ndarray:
    """Per token: the 0-based assistant turn it is supervised in (content and <|im_end|>), -1 elsewhere."""
    out = np.full(len(roles), -1, dtype=np.int16)
    sup = roles == SUPERVISED
    messages = np.unique(turns[sup])
    out[sup] = np.searchsorted(messages, turns[sup])
    return out


def list_column(table: pa.Table, name: str) -> list[np.ndarray]:
    """A list<...> column as one numpy array per row (views of the Arrow buffers, no Python lists)."""
    out = []
    for chunk in table.column(name).chunks:
        offsets, values = chunk.offsets.to_numpy(), chunk.flatten().to_numpy(zero_copy_only=False)
        base = offsets[0]
        out += [values[a - base : b - base] for a, b in zip(offsets[:-1], offsets[1:])]
    return out


def side_rows(table: pa.Table, side: str):
    """(traj, input_ids, roles, turns) of one side of each pair, as numpy arrays."""
    return zip(
        table.column(side).to_pylist(),
        *[list_column(table, f"{side}_{c}") for c in ("input_ids", "roles", "turns")],
    )


def trajectory_id(task: str, attempt: int) -> str:
    return f"{task}/a{attempt}"


def _read_attempts(files: Sequence[str | Path]) -> list[tuple[Attempt, Path]]:
    """(record, transcript path) of every attempt; transcripts are found next to their attempts.jsonl."""
    out = []
    for f in files:
        f = Path(f)
        for i, line in enumerate(f.read_text().splitlines()):
            if not line.strip():
                continue
            try:
                rec = Attempt.from_dict(json.loads(line))
            except (json.JSONDecodeError, TypeError) as e:
                raise ValueError(f"{f}: line {i + 1} is not an attempt record ({e})") from None
            out.append((rec, f.parent / "transcripts" / rec.task / f"attempt-{rec.attempt}.json"))
    return out


def _conversation(path: Path) -> list[dict]:
    """The attempt's messages up to and including its last assistant turn."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: the transcript of a recorded attempt is missing")
    messages = json.loads(path.read_text())["messages"]
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    return messages[: last + 1]


def _seed(seed: int, task: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:dmpo-pairs:{task}".encode()).digest()[:8], "little")


def draw_pairs(
    successes: list[int], failures: list[int], k: int, seed: int, task: str
) -> list[tuple[int, int]]:
    """k (success, failure) attempt pairs drawn without replacement (all when fewer), in a stable order."""
    combos = [(s, f) for s in sorted(successes) for f in sorted(failures)]
    if len(combos) <= k:
        return combos
    pick = np.random.default_rng(_seed(seed, task)).choice(len(combos), size=k, replace=False)
    return [combos[i] for i in sorted(pick)]


def _per_task(attempts: list[tuple[Attempt, Path]]) -> dict[str, dict]:
    tasks: dict[str, dict] = {}
    for rec, path in attempts:
        t = tasks.setdefault(rec.task, {"success": {}, "failure": {}, "infra_errors": 0, "no_turns": 0})
        if rec.failure_mode == "infra_error":
            t["infra_errors"] += 1
            continue
        conv = _conversation(path)
        if not any(m["role"] == "assistant" for m in conv):
            t["no_turns"] += 1
            continue
        t["success" if rec.success else "failure"][rec.attempt] = conv
    return tasks


def _summary(tasks: dict, drawn: dict, policy: str, task_set: str, pairs_per_task: int, seed: int) -> dict:
    per_task = [
        {
            "task": name,
            "successes": len(t["success"]),
            "failures": len(t["failure"]),
            "infra_errors": t["infra_errors"],
            "no_assistant_turn": t["no_turns"],
            "pairs": len(drawn.get(name, [])),
        }
        for name, t in sorted(tasks.items())
    ]
    return {
        "policy": policy,
        "task_set": task_set,
        "tasks": len(tasks),
        "attempts": sum(
            r["successes"] + r["failures"] + r["infra_errors"] + r["no_assistant_turn"] for r in per_task
        ),
        "successes": sum(r["successes"] for r in per_task),
        "failures": sum(r["failures"] for r in per_task),
        "infra_errors": sum(r["infra_errors"] for r in per_task),
        "no_assistant_turn": sum(r["no_assistant_turn"] for r in per_task),
        "tasks_with_pairs": sum(1 for r in per_task if r["pairs"]),
        "tasks_without_success": sum(1 for r in per_task if not r["successes"]),
        "tasks_without_failure": sum(1 for r in per_task if r["successes"] and not r["failures"]),
        "pairs": sum(r["pairs"] for r in per_task),
        "pairs_per_task": pairs_per_task,
        "seed": seed,
        "per_task": per_task,
    }


def _no_pairs_message(s: dict) -> str:
    return (
        f"DMPO: no (success, failure) pair from policy {s['policy']} on task set {s['task_set']}: "
        f"{s['tasks']} tasks, {s['attempts']} attempts ({s['successes']} successes, {s['failures']} failures, "
        f"{s['infra_errors']} infrastructure errors, {s['no_assistant_turn']} without an assistant turn); "
        f"{s['tasks_without_success']} tasks without a success, {s['tasks_without_failure']} without a failure "
        "(more dmpo.attempts, a stronger or a weaker policy, or other tasks)"
    )


def _table(rows: list[dict], serializer: ChatSerializer) -> pa.Table:
    cols: dict[str, list] = {"pair_id": [], "task": []}
    for side in SIDES:
        cols |= {f"{side}": [], f"{side}_attempt": [], f"{side}_n_turns": []}
    arrays: dict[str, list] = {f"{side}_{c}": [] for side in SIDES for c in ("input_ids", "roles", "turns")}
    for side in SIDES:
        for s in serializer.serialize_batch([r[f"{side}_messages"] for r in rows]):
            arrays[f"{side}_input_ids"].append(s.input_ids)
            arrays[f"{side}_roles"].append(s.roles)
            arrays[f"{side}_turns"].append(s.turns)
            cols[f"{side}_n_turns"].append(int(assistant_turn_ids(s.roles, s.turns).max()) + 1)
    for r in rows:
        for key in ("pair_id", "task", *[f"{side}{x}" for side in SIDES for x in ("", "_attempt")]):
            cols[key].append(r[key])
    out = {k: pa.array(v) for k, v in cols.items()}
    for side in SIDES:
        out[f"{side}_input_ids"] = list_array(arrays[f"{side}_input_ids"], np.int32)
        out[f"{side}_roles"] = list_array(arrays[f"{side}_roles"], np.int8)
        out[f"{side}_turns"] = list_array(arrays[f"{side}_turns"], np.int16)
    return pa.table(out)


def build_pairs(
    attempt_files: Sequence[str | Path],
    tokenizer_dir: str | Path,
    out_pairs: str | Path,
    out_summary: str | Path,
    policy: str,
    task_set: str,
    pairs_per_task: int,
    seed: int,
) -> dict:
    """pairs.parquet and its summary from the preference rollouts; NoPairs when there is not one pair."""
    from horizon.data.tokenizer import load

    tasks = _per_task(_read_attempts(attempt_files))
    drawn = {
        name: draw_pairs(list(t["success"]), list(t["failure"]), pairs_per_task, seed, name)
        for name, t in sorted(tasks.items())
        if t["success"] and t["failure"]
    }
    summary = _summary(tasks, drawn, policy, task_set, pairs_per_task, seed)
    if not summary["pairs"]:
        raise NoPairs(_no_pairs_message(summary))
    rows = [
        {
            "pair_id": f"{trajectory_id(name, s)}-vs-a{f}",
            "task": name,
            "chosen": trajectory_id(name, s),
            "chosen_attempt": s,
            "chosen_messages": tasks[name]["success"][s],
            "rejected": trajectory_id(name, f),
            "rejected_attempt": f,
            "rejected_messages": tasks[name]["failure"][f],
        }
        for name, pairs in drawn.items()
        for s, f in pairs
    ]
    table = _table(rows, ChatSerializer(load(tokenizer_dir)))
    for side in SIDES:
        summary[f"{side}_tokens_mean"] = float(
            np.mean([len(x) for x in list_column(table, f"{side}_input_ids")])
        )
        summary[f"{side}_turns_mean"] = float(np.mean(table[f"{side}_n_turns"].to_pylist()))
    write_table(out_pairs, table)
    write_json(out_summary, summary)
    log.info(
        "DMPO pairs from %s on %s: %d pairs from %d of %d tasks (%d without a success, %d without a failure); "
        "%d successes, %d failures, %d infrastructure errors",
        policy,
        task_set,
        summary["pairs"],
        summary["tasks_with_pairs"],
        summary["tasks"],
        summary["tasks_without_success"],
        summary["tasks_without_failure"],
        summary["successes"],
        summary["failures"],
        summary["infra_errors"],
    )
    return summary
