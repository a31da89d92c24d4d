import copy
import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from horizon.data.normalize import normalize
from horizon.data.sources import CorpusError, download
from tests.helpers import CORPUS_SAMPLE, fixture_rows

GOOD = fixture_rows()[0]  # completed, with a parse error and its recovery


def _variant(fn):
    row = copy.deepcopy(GOOD)
    fn(row)
    return row


BAD_ROWS = {
    "not_alternating": _variant(lambda r: r["conversations"].insert(1, {"role": "user", "content": "again"})),
    "empty_conversations": _variant(lambda r: r.update(conversations=[])),
    "missing_conversations": _variant(lambda r: r.pop("conversations")),
    "system_turn": _variant(lambda r: r["conversations"].insert(0, {"role": "system", "content": "sys"})),
    "null_content": _variant(lambda r: r["conversations"][3].update(content=None)),
    "last_turn_unparseable": _variant(
        lambda r: r["conversations"][-1].update(content="<think>x</think>\n{oops")
    ),
    # only one task_complete: the confirmation question and its answer are missing
    "no_confirmation": _variant(lambda r: r.update(conversations=r["conversations"][:-2])),
    "not_completed": _variant(
        lambda r: r["conversations"][-1].update(
            content=r["conversations"][-1]["content"].replace(
                '"task_complete": true', '"task_complete": false'
            )
        )
    ),
    "last_turn_not_assistant": _variant(
        lambda r: r["conversations"].append({"role": "user", "content": "more"})
    ),
}


def run(tmp_path, source, **kw):
    out = tmp_path / "out"
    download(str(source), out / "raw")
    return normalize(
        out / "raw" / "manifest.json", out / "traj.parquet", out / "q.parquet", out / "stats.json", **kw
    ), out


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


def test_fixture_corpus(tmp_path):
    stats, out = run(tmp_path, CORPUS_SAMPLE)
    assert stats["rows"] == 3 and stats["completed"] == 2 and stats["duplicates"] == 0
    assert stats["quarantined"] == {"not_completed": 1}
    t = pq.read_table(out / "traj.parquet")
    assert t.column("task").to_pylist() == ["csv_count_task_0001", "mkdir_write_task_0002"]
    assert t.column("n_turns").to_pylist() == [10, 8]
    assert t.column("enable_thinking").to_pylist() == [True, True]
    # non-ASCII content survives byte for byte
    conv = t.column("conversations").to_pylist()[1]
    assert "✓ok" in conv[2]["content"] and conv == fixture_rows()[1]["conversations"]
    q = pq.read_table(out / "q.parquet").to_pylist()
    assert q == [
        {
            "source": "corpus-sample.jsonl",
            "row": 2,
            "task": "gcc_fix_task_0003",
            "reason": "not_completed",
            "detail": "the last assistant turn does not set task_complete: true",
        }
    ]


def test_every_bad_row_is_quarantined_with_its_reason(tmp_path):
    rows = [GOOD, *BAD_ROWS.values(), GOOD]  # the last GOOD is a duplicate
    src = write_jsonl(tmp_path / "bad.jsonl", rows)
    with open(src, "a") as fh:
        fh.write("{not json\n")
    stats, out = run(tmp_path, src)
    expected = {reason: 1 for reason in BAD_ROWS}
    expected["unreadable_row"] = 1
    assert stats["quarantined"] == dict(sorted(expected.items()))
    assert stats["completed"] == 1 and stats["duplicates"] == 1
    assert stats["rows"] == stats["completed"] + stats["duplicates"] + sum(stats["quarantined"].values())
    q = pq.read_table(out / "q.parquet").to_pylist()
    by_reason = {r["reason"]: r for r in q}
    for i, reason in enumerate(BAD_ROWS, start=1):
        assert by_reason[reason]["row"] == i and by_reason[reason]["source"] == "bad.jsonl"
    assert "turn 1 is user" in by_reason["not_alternating"]["detail"]


def test_parquet_and_gzip_inputs_match_jsonl(tmp_path):
    rows = fixture_rows()
    d = tmp_path / "corpus"
    (d / "a").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows[:2]), d / "a" / "part.parquet", row_group_size=1)
    with gzip.open(d / "b.jsonl.gz", "wt") as fh:
        fh.write(json.dumps(rows[2]) + "\n" + json.dumps(rows[0]) + "\n")
    (d / "README.md").write_text("not data")
    stats, out = run(tmp_path, d)
    assert stats["rows"] == 4 and stats["completed"] == 2 and stats["duplicates"] == 1
    assert [f["source"] for f in stats["files"]] == ["a/part.parquet", "b.jsonl.gz"]
    (tmp_path / "ref").mkdir()
    _, ref_out = run(tmp_path / "ref", CORPUS_SAMPLE)
    assert (
        pq.read_table(out / "traj.parquet").column("traj_id").to_pylist()
        == pq.read_table(ref_out / "traj.parquet").column("traj_id").to_pylist()
    )


def test_not_a_parquet_file_stops_naming_it(tmp_path):
    bad = tmp_path / "broken.parquet"
    bad.write_text("this is not parquet")
    with pytest.raises(CorpusError, match="broken.parquet: not a readable parquet file"):
        run(tmp_path, bad)


def test_parquet_without_conversations_stops_naming_it(tmp_path):
    f = tmp_path / "wrong.parquet"
    pq.write_table(pa.table({"messages": ["x"], "task": ["t"]}), f)
    with pytest.raises(
        CorpusError, match=r"wrong.parquet: no `conversations` column \(columns: messages, task\)"
    ):
        run(tmp_path, f)


@pytest.mark.parametrize("n_rows", [1, 2], ids=["one-row", "two-rows"])
def test_jsonl_without_conversations_stops_naming_it(tmp_path, n_rows):
    """A one-line file too (it used to be quarantined instead: the line index of a single line is 0)."""
    f = write_jsonl(tmp_path / "chat.jsonl", [{"messages": []}] * n_rows)
    with pytest.raises(CorpusError, match="chat.jsonl: no row has a `conversations` key"):
        run(tmp_path, f)


def test_unsupported_file_or_empty_dir(tmp_path):
    f = tmp_path / "data.csv"
    f.write_text("a,b\n")
    with pytest.raises(CorpusError, match="data.csv: unsupported format"):
        download(str(f), tmp_path / "raw")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="no .parquet, .jsonl, .jsonl.gz files"):
        download(str(tmp_path / "empty"), tmp_path / "raw")
    with pytest.raises(CorpusError, match="not a hub id"):
        download("/no/such/dir", tmp_path / "raw")


def test_hub_download_offline_from_cache(tmp_path, monkeypatch):
    """The hub path: snapshot_download from a populated HF cache with HF_HUB_OFFLINE=1."""
    sha = "a" * 40
    repo = tmp_path / "hf" / "hub" / "datasets--nvidia--Nemotron-Terminal-Corpus"
    snap = repo / "snapshots" / sha
    (snap / "dataset_adapters").mkdir(parents=True)
    (snap / "synthetic_tasks/skill_based/easy/files").mkdir(parents=True)
    (snap / "synthetic_tasks/skill_based/medium/x").mkdir(parents=True)
    rows = fixture_rows()
    pq.write_table(pa.Table.from_pylist(rows[:1]), snap / "dataset_adapters/code.parquet")
    pq.write_table(
        pa.Table.from_pylist(rows[1:]), snap / "synthetic_tasks/skill_based/easy/files/data_filtered.parquet"
    )
    pq.write_table(
        pa.Table.from_pylist(rows), snap / "synthetic_tasks/skill_based/medium/x/data_filtered.parquet"
    )
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(sha)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import importlib

    import huggingface_hub.constants as hfc

    importlib.reload(hfc)
    try:
        patterns = {
            "dataset_adapters": ["dataset_adapters/*.parquet"],
            "skill_based_easy": ["synthetic_tasks/skill_based/easy/**/*.parquet"],
            "skill_based_medium": ["synthetic_tasks/skill_based/medium/**/*.parquet"],
        }
        m = download(
            "nvidia/Nemotron-Terminal-Corpus",
            tmp_path / "raw",
            configs=["dataset_adapters", "skill_based_easy"],
            config_patterns=patterns,
        )
        assert m["kind"] == "hub" and m["resolved_revision"] == sha
        assert [f["source"] for f in m["files"]] == ["dataset_adapters", "skill_based_easy"]
        stats = normalize(
            tmp_path / "raw/manifest.json",
            tmp_path / "t.parquet",
            tmp_path / "q.parquet",
            tmp_path / "s.json",
        )
        assert stats["rows"] == 3 and stats["completed"] == 2
        with pytest.raises(CorpusError, match="unknown config"):
            download(
                "nvidia/Nemotron-Terminal-Corpus",
                tmp_path / "raw",
                configs=["nope"],
                config_patterns=patterns,
            )
    finally:
        monkeypatch.undo()
        importlib.reload(hfc)
