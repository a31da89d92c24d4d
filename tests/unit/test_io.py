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
