"""eval.harness harbor changes what a rollout job runs, not the DAG: the cluster dry-run lists the same jobs."""

import re

import yaml

from tests.helpers import REPO, deep_update, job_counts, snakemake, write_config


def planned(cfg: dict, tmp_path, name: str) -> tuple[dict, set[str]]:
    path = write_config(tmp_path / f"{name}.yaml", cfg)
    args = ["--profile", "slurm", "--configfile", str(path), "--directory", str(tmp_path / name), "-n"]
    out = snakemake(args, cwd=REPO).stdout
    return job_counts(out), set(re.findall(r"^\s+output: (.*)$", out, re.M))


def test_harbor_engine_slurm_dry_run_lists_the_same_jobs(tmp_path):
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["eval"]["benchmarks"].pop("terminal-bench-core")  # a Harbor job runs Harbor-format tasks only
    ours = planned(cfg, tmp_path, "horizon")
    theirs = planned(
        deep_update(cfg, {"eval": {"harness": "harbor", "harbor": {"environment": "daytona"}}}),
        tmp_path,
        "harbor",
    )
    # 25 models x 2 Harbor-format benchmarks (TB2.0, TBLite) x 4 repeats
    assert theirs == ours and ours[0]["rollout"] == 25 * 2 * 4
