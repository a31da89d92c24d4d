"""The scripted teacher through the real harness makes a corpus that normalize accepts as completed."""

import json

import pytest

from horizon.data.normalize import normalize
from horizon.data.sources import download
from horizon.eval.collect.corpus import collect
from horizon.eval.tasks.benchmark import write_manifest
from tests.helpers import REPO, same_terminal

pytestmark = pytest.mark.engine


def test_teacher_corpus_is_real_harness_output(tools, tmp_path):
    write_manifest(
        REPO / "demo" / "tasks", "harbor", tmp_path / "tasks.json", only=["run-script", "sort-names"]
    )

    def collect_into(out):
        collect(
            tmp_path / "tasks.json",
            REPO / "demo" / "prompt.yaml",
            out,
            variants=4,
            concurrency=2,
            sandbox_options={"toolchain": tools},
        )
        return out

    out = collect_into(tmp_path / "corpus.jsonl")
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 8 and {r["task"] for r in rows} == {"run-script", "sort-names"}
    lengths = {r["trial_name"]: len(r["conversations"]) for r in rows}
    assert (
        lengths["run-script__v0"]
        < lengths["run-script__v1"]
        < lengths["run-script__v2"]
        < lengths["run-script__v3"]
    )
    v2 = next(r for r in rows if r["trial_name"] == "run-script__v2")["conversations"]
    assert any(
        "Permission denied" in m["content"] for m in v2 if m["role"] == "user"
    )  # a real error, recovered
    download(str(out), tmp_path / "raw")
    stats = normalize(
        tmp_path / "raw/manifest.json", tmp_path / "t.parquet", tmp_path / "q.parquet", tmp_path / "s.json"
    )
    assert stats["completed"] == 8 and stats["quarantined"] == {}
    # the same seed collects the same corpus (timestamps of the task files are fixed); the teacher's
    # turns do not depend on what it sees, so only a terminal capture may differ, and only by timing
    again = [json.loads(x) for x in collect_into(tmp_path / "corpus2.jsonl").read_text().splitlines()]
    assert [without_observations(r) for r in again] == [without_observations(r) for r in rows]
    for r, s in zip(rows, again):
        seen = [(m["content"], n["content"]) for m, n in zip(r["conversations"], s["conversations"])]
        assert all(same_terminal(a, b) for a, b in seen if a != b), r["trial_name"]


def without_observations(row: dict) -> dict:
    """A corpus row with its terminal captures (the user turns after the first, the task) blanked."""
    users = [i for i, m in enumerate(row["conversations"]) if m["role"] == "user"]
    turns = [
        {**m, "content": "<screen>"} if i in users[1:] else m for i, m in enumerate(row["conversations"])
    ]
    return {**row, "conversations": turns}
