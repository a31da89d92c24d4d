"""The SCRIPTED judge server (scripted_judge.py: a FAKE judge) and corpora written for it.

The judge's answers follow markers in the trajectory text (QUALITY=<k>, AGENT-REFUSES, MALFORMED-ONCE...);
`corpus` writes trajectories.parquet rows whose assistant turns are the given texts.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from horizon.data.normalize import TRAJECTORY_SCHEMA
from tests.doubles.servers import scripted_process


def scripted_server(*args, log=None):
    """The SCRIPTED judge server in its own process; yields (base URL, process)."""
    return scripted_process("scripted_judge.py", *args, log=log, what="scripted judge server")


def corpus(tmp_path, texts: dict[str, str]) -> str:
    rows = [{"traj_id": t, "task": t, "source": "f", "source_row": i, "n_turns": 2,
             "conversations": [{"role": "user", "content": f"task {t}"}, {"role": "assistant", "content": x}]}
            for i, (t, x) in enumerate(texts.items())]  # fmt: skip
    path = tmp_path / "trajectories.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=TRAJECTORY_SCHEMA), path)
    return str(path)
