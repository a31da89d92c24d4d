"""The filters between normalize and tokenize, over several teachers' corpora: per task, common tasks,
named errors rather than an empty corpus."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from horizon.data.filters import FilterError, build_training_corpus
from horizon.data.normalize import TRAJECTORY_SCHEMA
from horizon.data.quality import QUALITY_SCHEMA


def corpus_files(tmp_path, name, rows):
    """rows: (traj_id, task, n_steps, chars)."""
    traj = [{"traj_id": t, "task": task, "source": "f", "source_row": i,
             "conversations": [{"role": "user", "content": "x"}], "n_turns": 1}
            for i, (t, task, _, _) in enumerate(rows)]  # fmt: skip
    qual = [{"traj_id": t, "task": task, "n_steps": s, "chars": c, "tor": 0.5} for t, task, s, c in rows]
    d = tmp_path / name
    d.mkdir()
    pq.write_table(pa.Table.from_pylist(traj, schema=TRAJECTORY_SCHEMA), d / "trajectories.parquet")
    pq.write_table(pa.Table.from_pylist(qual, schema=QUALITY_SCHEMA), d / "quality.parquet")
    return d


ROWS_A = [("a1", "t1", 4, 900), ("a2", "t1", 3, 950), ("a3", "t1", 3, 800), ("a4", "t2", 6, 10), ("a5", None, 2, 5),
          ("a6", "t3", 5, 100)]  # fmt: skip


ROWS_B = [("b1", "t1", 2, 10), ("b2", "t2", 2, 10), ("b3", "t4", 2, 10)]


def kept(d):
    return pq.read_table(d / "train" / "trajectories.parquet").column("traj_id").to_pylist()


def test_per_task_keeps_the_shortest_or_longest_success(tmp_path):
    a = corpus_files(tmp_path, "a", ROWS_A)
    stats = build_training_corpus(
        "a", a / "trajectories.parquet", a / "quality.parquet", a / "train", per_task="shortest"
    )
    # t1: a2 and a3 have 3 turns, a3 has fewer characters; a5 has no task id: kept, counted
    assert kept(a) == ["a3", "a4", "a5", "a6"]
    assert stats["removed"] == {"per_task_shortest": 2} and stats["without_task_id"] == 1
    assert stats["rows"] == stats["kept"] + sum(stats["removed"].values())
    removed = pq.read_table(a / "train" / "removed.parquet").to_pylist()
    assert {r["traj_id"] for r in removed} == {"a1", "a2"} and removed[0]["reason"] == "per_task_shortest"
    build_training_corpus(
        "a", a / "trajectories.parquet", a / "quality.parquet", a / "train", per_task="longest"
    )
    assert kept(a) == ["a1", "a4", "a5", "a6"]


def test_common_tasks_keeps_what_every_source_solved(tmp_path):
    a, b = corpus_files(tmp_path, "a", ROWS_A), corpus_files(tmp_path, "b", ROWS_B)
    both = {"a": (a / "trajectories.parquet", []), "b": (b / "trajectories.parquet", [])}
    stats = build_training_corpus(
        "a", a / "trajectories.parquet", a / "quality.parquet", a / "train", common_with=both
    )
    assert kept(a) == ["a1", "a2", "a3", "a4"]  # t1, t2 are common; t3 and the task-less a5 go
    assert stats["removed"] == {"no_task_id": 1, "not_common_task": 1}
    assert stats["common_tasks"] == {"tasks": 2, "sources": ["a", "b"]}
    # removals decided upstream (decontamination, the judge) come first: without b's t2, t2 is not common
    verdict = tmp_path / "verdict.parquet"
    pq.write_table(pa.table({"traj_id": ["b2"], "reason": ["contaminated"], "detail": ["x"]}), verdict)
    both["b"] = (b / "trajectories.parquet", [verdict])
    build_training_corpus(
        "a", a / "trajectories.parquet", a / "quality.parquet", a / "train", common_with=both
    )
    assert kept(a) == ["a1", "a2", "a3"]


def test_filters_fail_with_named_errors_never_an_empty_corpus(tmp_path):
    a, b = corpus_files(tmp_path, "a", ROWS_A), corpus_files(tmp_path, "b", [("b1", None, 1, 1)])
    both = {"a": (a / "trajectories.parquet", []), "b": (b / "trajectories.parquet", [])}
    args = ("a", a / "trajectories.parquet", a / "quality.parquet", a / "train")
    with pytest.raises(FilterError, match="source 'b' has no task ids in column 'task'"):
        build_training_corpus(*args, common_with=both)
    c = corpus_files(tmp_path, "c", [("c1", "t9", 1, 1)])
    with pytest.raises(FilterError, match=r"no task in common \(a: 3 tasks, c: 1 tasks\)"):
        build_training_corpus(*args, common_with={"a": both["a"], "c": (c / "trajectories.parquet", [])})
    with pytest.raises(FilterError, match="corpus.task_key: 'episodes' is not a trajectory column"):
        build_training_corpus(*args, task_key="episodes")
    everything = tmp_path / "all.parquet"
    pq.write_table(pa.table({"traj_id": [r[0] for r in ROWS_A], "reason": ["judge_below_threshold"] * 6,
                             "detail": [""] * 6}), everything)  # fmt: skip
    with pytest.raises(FilterError, match=r"no trajectory left .*judge_below_threshold': 6"):
        build_training_corpus(*args, removal_paths=[everything])
    assert not (a / "train" / "trajectories.parquet").exists()
