"""The scripted teacher through the real harness makes a corpus that normalize accepts as completed."""

import json

import pytest

from horizon.data.normalize import normalize
from horizon.data.sources import download
from horizon.eval.collect.corpus import collect
from horizon.eval.tasks.benchmark import write_manifest
from tests.helpers import REPO

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
            capture={"capture": "idle", "capture_idle_max_s": 5},  # as the tests' demo config reads it
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
    # the same seed collects the same corpus, byte for byte: the task files have fixed timestamps, the
    # teacher's turns do not depend on what it sees, the terminal is read when idle, and no command of
    # these tasks has two processes writing to it at once
    again = [json.loads(x) for x in collect_into(tmp_path / "corpus2.jsonl").read_text().splitlines()]
    assert again == rows
