"""horizon.io: atomic outputs leave nothing of a killed writer behind."""

import subprocess
import sys

from horizon.io import write_text


def test_an_output_written_again_removes_what_a_killed_writer_left(tmp_path):
    out = tmp_path / "shard-000.parquet"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = tmp_path / f".shard-000.parquet.tmp-{int(dead.stdout)}"  # a job SIGKILLed while writing
    stale.write_text("half")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        busy = tmp_path / f".shard-000.parquet.tmp-{live.pid}"  # a writer that still runs: not ours to remove
        busy.write_text("in progress")
        other = tmp_path / f".shard-001.parquet.tmp-{int(dead.stdout)}"  # another output's: left alone
        other.write_text("x")
        write_text(out, "done")
        assert out.read_text() == "done"
        assert not stale.exists() and busy.exists() and other.exists()
    finally:
        live.kill()
        live.wait()


def test_a_journal_resumes_only_what_was_made_from_the_same_inputs(tmp_path, caplog):
    from horizon.io import Journal

    path = tmp_path / "attempts.partial.jsonl"
    with Journal(path, {"model": "a", "seed": 1}) as j:
        j.append([{"n": 0}, {"n": 1}])
    assert Journal(path, {"model": "a", "seed": 1}).read() == [{"n": 0}, {"n": 1}]  # the same: resumed
    with path.open("a") as fh:
        fh.write('{"n": 2')  # a line cut by a kill ends the reading, as without made_from
    assert Journal(path, {"model": "a", "seed": 1}).read() == [{"n": 0}, {"n": 1}]
    assert (
        Journal(path, {"model": "a", "seed": (1,)}).read() == []
    )  # JSON's view: a tuple is a list, 1 != [1]
    assert "changed: seed" in caplog.text and (tmp_path / "attempts.partial.jsonl.stale").exists()
    assert not path.exists()  # set aside whole, not deleted: a user who changed a key back can recover it


def test_a_journal_whose_inputs_were_never_recorded_is_not_resumed(tmp_path, caplog):
    from horizon.io import Journal

    path = tmp_path / ".shard-000.partial.jsonl"
    path.write_text('{"traj_id": "t0", "score": 1.0}\n')  # written before made_from existed
    j = Journal(path, {"model": "b"})
    assert j.read() == [] and "were not recorded" in caplog.text
    j.append([{"traj_id": "t0", "score": 2.0}])
    j.close()
    assert Journal(path, {"model": "b"}).read() == [{"traj_id": "t0", "score": 2.0}]
    Journal(path, {"model": "b"}).remove()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".shard-000.partial.jsonl.stale"]


def test_a_model_stamp_changes_with_its_weights_and_config(tmp_path):
    import os

    from horizon.io import model_stamp, stamp

    (tmp_path / "config.json").write_text("{}")
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"\0" * 64)
    first = model_stamp(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{}")  # not a weight: the same model
    assert model_stamp(tmp_path) == first
    weights.write_bytes(b"\1" * 64)  # the same size, other weights (hashed below the size bound)
    assert model_stamp(tmp_path) != first
    big = stamp(weights, hash_below=1)  # above the bound: size and mtime
    os.utime(weights, ns=(0, 5))
    assert stamp(weights, hash_below=1) != big
    assert model_stamp(tmp_path / "absent") == str(tmp_path / "absent")  # an endpoint's model name
