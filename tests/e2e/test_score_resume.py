"""SIGKILL a scoring shard half-way; the rerun scores only what is missing and equals an uninterrupted run."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from horizon.data.tokens import TOKENS_SCHEMA

pytestmark = pytest.mark.slow


def test_killed_shard_resumes_without_loss_or_duplicates(tiny_corpus, tmp_path):
    rng = np.random.default_rng(0)
    n, length = 400, 300
    rows = []
    for i in range(n):
        roles = (rng.random(length) < 0.6).astype(np.int8)
        rows.append(
            {
                "traj_id": f"t{i:04d}",
                "input_ids": rng.integers(0, 300, length).tolist(),
                "roles": roles.tolist(),
                "turns": [0] * length,
                "n_tokens": length,
            }
        )
    shard = tmp_path / "tokens.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=TOKENS_SCHEMA), shard)
    h1, h2 = 100, 300
    pool = pa.table(
        {
            "traj_id": [r["traj_id"] for r in rows],
            "n_tokens": pa.array([length] * n, pa.int32()),
            "n_window_tokens": pa.array(
                [int(np.sum(np.array(r["roles"][h1:h2]) == 1)) for r in rows], pa.int32()
            ),
        }
    )
    pq.write_table(pool, tmp_path / "pool.parquet")
    call = (
        f"from horizon.score.scorer import score_shard; score_shard('{tmp_path}/pool.parquet', ['{shard}'], "
        f"'{tiny_corpus}/student', '{{out}}', {h1}, {h2}, 0, 1, batch_tokens={h2}, write_every=1)"
    )
    killed = tmp_path / "killed" / "shard-000.parquet"
    killed.parent.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", call.format(out=killed)], start_new_session=True)
    partial = killed.with_name(".shard-000.partial.jsonl")
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if partial.exists() and partial.read_text().count("\n") >= 20:
            break
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_at_kill = partial.read_text().count("\n")
    assert 20 <= done_at_kill < n and not killed.exists()
    subprocess.run([sys.executable, "-c", call.format(out=killed)], check=True)
    straight = tmp_path / "straight" / "shard-000.parquet"
    straight.parent.mkdir()
    subprocess.run([sys.executable, "-c", call.format(out=straight)], check=True)
    a, b = pq.read_table(killed).to_pylist(), pq.read_table(straight).to_pylist()
    assert [r["traj_id"] for r in a] == [r["traj_id"] for r in b]  # none lost, none twice
    assert len(a) == n and not partial.exists()
    assert [r["score"] for r in a] == pytest.approx([r["score"] for r in b], abs=1e-6)
