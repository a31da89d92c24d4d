"""synth/config.yaml run by Snakemake against the SCRIPTED synthesis server (a FAKE author, reviewer and
teacher; no model behind it), with real verification and collection in the local sandbox: seeds ->
verified tasks -> the teacher's corpus -> normalize -> tokens, as the miniature run of docs/stages/synthesis.md."""

import json

import pytest
import yaml

from tests.doubles.servers import scripted_synth_server
from tests.helpers import REPO, snakemake, write_config

pytestmark = pytest.mark.slow


def test_seeds_to_tokens_from_one_config(tmp_path, local_engine):
    raw = yaml.safe_load((REPO / "synth" / "config.yaml").read_text())
    raw["synth"]["seeds"] = str(REPO / raw["synth"]["seeds"])
    raw["eval"]["benchmarks"]["demo"]["path"] = str(REPO / "demo" / "tasks")
    raw["eval"]["prompt_template"] = str(REPO / "demo" / "prompt.yaml")
    with scripted_synth_server() as url:
        raw["synth"]["endpoint"] = raw["corpus"]["collect"]["teacher"]["endpoint"] = url + "/v1"
        cfg = write_config(tmp_path / "synth.yaml", raw)
        args = ["--configfile", str(cfg), "--directory", str(tmp_path), "--cores", "2"]
        snakemake([*args, "results/tokens/shard-000.parquet"], timeout=900)
        again = snakemake([*args, "-n", "results/tokens/shard-000.parquet"]).stdout
    assert "Nothing to be done" in again
    res = tmp_path / "results"
    funnel = json.loads((res / "synth/funnel.json").read_text())
    assert funnel["kept"] == 2 and funnel["rejected"] == {
        "environment": 1,
        "build": 1,
        "round_trip": 1,
        "attack": 1,
    }
    tasks = json.loads((res / "synth/tasks.json").read_text())["tasks"]
    assert [t["id"] for t in tasks] == ["so-101", "so-105"] and (
        res / "synth/tasks/so-105/task.toml"
    ).exists()
    usage = json.loads((res / "synth/corpus.usage.json").read_text())
    assert (usage["successes"], usage["failures"]) == (2, 2) and usage["cost_usd"] > 0
    stats = json.loads((res / "corpus/stats.json").read_text())
    assert (
        stats["completed"] == 1 and stats["duplicates"] == 1
    )  # the FAKE teacher's two attempts are one conversation
    assert (res / "tokens/shard-000.parquet").exists()
