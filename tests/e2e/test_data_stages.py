"""The fixture corpus through download -> normalize -> tokenize -> horizons, run by Snakemake."""

import json

import pyarrow.parquet as pq

from horizon.data.chatml import KEEP_THINKING_TEMPLATE
from tests.helpers import CORPUS_SAMPLE, snakemake, write_config


def data_config(tmp_path, tokenizer_dir, source=CORPUS_SAMPLE):
    (tmp_path / "tasks").mkdir(exist_ok=True)  # configured paths exist before a run starts
    return write_config(
        tmp_path / "config.yaml",
        {
            "student": {"model": str(tokenizer_dir)},
            "corpus": {"source": str(source)},
            "tokenize": {"shards": 2, "threads": 1},
            "horizons": [64, 256, 512],
            "split": {"heldout": 0},
            "refine": {"h1": 256, "h2": [512], "rho": [0.5], "selections": ["top"]},
            "eval": {
                "benchmarks": {"demo": {"format": "tb1", "path": str(tmp_path / "tasks")}},
                "sandbox": "local",
                "backend": "transformers",
            },
        },
    )


TARGETS = [
    "results/horizons/K64.parquet",
    "results/horizons/K256.parquet",
    "results/horizons/pool-H256-512.parquet",
]


def test_fixture_corpus_through_the_data_stages(tmp_path, tiny_tokenizer_dir, tiny_tokenizer):
    cfg = data_config(tmp_path, tiny_tokenizer_dir)
    snakemake(["--configfile", str(cfg), "--directory", str(tmp_path), "-c2", *TARGETS])
    res = tmp_path / "results"
    stats = json.loads((res / "corpus/stats.json").read_text())
    assert (stats["rows"], stats["completed"], stats["quarantined"]) == (3, 2, {"not_completed": 1})
    traj = {r["traj_id"]: r for r in pq.read_table(res / "corpus/trajectories.parquet").to_pylist()}
    tokens = [r for i in range(2) for r in pq.read_table(res / f"tokens/shard-{i:03d}.parquet").to_pylist()]
    assert sorted(r["traj_id"] for r in tokens) == sorted(traj)
    for r in tokens:
        ref = tiny_tokenizer.apply_chat_template(
            traj[r["traj_id"]]["conversations"], tokenize=True, chat_template=KEEP_THINKING_TEMPLATE
        )
        ref = ref["input_ids"] if hasattr(ref, "keys") else ref
        assert r["input_ids"] == list(ref) and r["n_tokens"] == len(ref)
    k64 = pq.read_table(res / "horizons/K64.parquet").to_pylist()
    assert all(r["kept_tokens"] == 64 and r["decision_steps"] == 0 for r in k64)  # the prompt alone is longer
    pool = pq.read_table(res / "horizons/pool-H256-512.parquet").to_pylist()
    assert [r["traj_id"] for r in pool] == sorted(
        traj, key=lambda t: -len([x for x in tokens if x["traj_id"] == t][0]["input_ids"])
    )
    # a second run has nothing to do
    out = snakemake(["--configfile", str(cfg), "--directory", str(tmp_path), "-c2", "-n", *TARGETS]).stdout
    assert "Nothing to be done" in out


def test_a_broken_corpus_file_stops_the_run_naming_it(tmp_path, tiny_tokenizer_dir):
    bad = tmp_path / "corpus.parquet"
    bad.write_text("not parquet at all")
    cfg = data_config(tmp_path, tiny_tokenizer_dir, source=bad)
    proc = snakemake(["--configfile", str(cfg), "--directory", str(tmp_path), "-c1", TARGETS[0]], check=False)
    assert proc.returncode != 0
    log = (tmp_path / "results/logs/normalize.log").read_text()
    assert "corpus.parquet: not a readable parquet file" in log
    assert not (tmp_path / "results/corpus/trajectories.parquet").exists()
