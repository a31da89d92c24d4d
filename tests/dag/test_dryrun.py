"""Dry-runs of the paper grid as users type them: job counts per rule computed from config."""

import pytest

from horizon import config as hc
from tests.helpers import REPO, deep_update, demo_config, job_counts, snakemake, write_config


def expected_counts(cfg: dict) -> dict[str, int]:
    ref = cfg["refine"]
    n_subsets = len(ref["h2"]) * (len(ref["rho"]) * len(ref["selections"]) + int(ref["two_stage_full"]))
    n_models = len(cfg["horizons"]) + n_subsets + int(cfg["eval"]["include_base"])
    benches = len(cfg["eval"]["benchmarks"])
    counts = {
        "download": 1,
        "student": 1,
        "normalize": 1,
        "tokenize": cfg["tokenize"]["shards"],
        "horizons": len(set(cfg["horizons"]) | {ref["h1"]} | set(ref["h2"])),
        "heldout": 1,
        "pool": len(ref["h2"]),
        "train_single": len(cfg["horizons"]),
        "score": len(ref["h2"]) * cfg["score"]["shards"],
        "merge_scores": len(ref["h2"]),
        "select": n_subsets,
        "subset_summary": 1,
        "refine": n_subsets,
        "diagnostics": 1,
        "benchmark": benches,
        "rollout": n_models * benches * cfg["eval"]["repeats"],
        "table_reliability": 1,
        "table_cost": 1,
        "table_behaviour": 1,
        "table_budget": 1,
        "table_tasks": 1,
        "table_main": 1,
        "table_benchmarks": 1,
        "table_episodes": 1,
        "annotations": n_models * benches,  # one export per model x benchmark for annotators
        "figures": 1,
        "all": 1,
    }
    if cfg["report"]["paired"]:
        counts["paired"] = len(cfg["report"]["paired"])
        counts["cancellation"] = len(cfg["report"]["paired"])
    if cfg["eval"]["prompt_template"] is None:
        counts["prompt_template"] = 1
    elif cfg["eval"]["prompt_template"].startswith("terminus-2-"):
        counts["terminus_template"] = 1
    if cfg["student"].get("build"):
        counts["build_student"] = 1
    if cfg["corpus"].get("collect"):
        counts["collect_corpus"] = 1
    return counts


PAPER = hc.load(REPO / "config.yaml")


def test_paper_grid_counts_match_config():
    c = expected_counts(PAPER)
    # the paper grid, spelled out once: 25 models (base, 4 single-stage, 2 x (9 + 1) refinements) on three
    # benchmarks (Terminal-Bench v1 core, Terminal-Bench 2.0, OpenThoughts-TBLite: Tables 11-12)
    assert c["rollout"] == 25 * 3 * 4 and c["refine"] == 20 and c["train_single"] == 4
    assert c["benchmark"] == 3 and PAPER["eval"]["benchmarks"]["openthoughts-tblite"] == {
        "format": "harbor",
        "hf": "open-thoughts/OpenThoughts-TBLite",
        "revision": "main",
        "tasks": None,
    }
    # the configured pairs, among them the paper's B.2 comparison single-K12288 vs single-K16384
    assert ["single-K12288", "single-K16384"] in PAPER["report"]["paired"] and c["cancellation"] == 2


def in_empty_dir(tmp_path) -> list[str]:
    """Dry-runs in an empty working directory: what the repository's own results/ holds does not count."""
    return ["--directory", str(tmp_path)]


def test_paper_grid_lists_every_new_table_target(tmp_path):
    args = ["--configfile", str(REPO / "config.yaml"), *in_empty_dir(tmp_path), "-n"]
    out = snakemake([*args, "-q", "rules"], cwd=REPO).stdout + snakemake(args, cwd=REPO).stdout
    for target in ("tables/main.md", "tables/benchmarks.md", "tables/episodes.md",
                   "tables/cancellation-single-K12288-vs-single-K16384.md",
                   "annotations/single-K16384-terminal-bench-2.csv", "benchmarks/openthoughts-tblite/tasks.json",
                   "rollouts/single-K16384/openthoughts-tblite/r0/attempts.jsonl"):  # fmt: skip
        assert f"results/{target}" in out, target
    assert "results/tables/labels.md" not in out  # waits for human input: built only when asked for


@pytest.mark.parametrize("profile", [[], ["--profile", "slurm"]], ids=["local", "slurm-profile"])
def test_full_grid_dry_run(profile, tmp_path):
    args = ["--configfile", str(REPO / "config.yaml"), *in_empty_dir(tmp_path)]
    out = snakemake([*profile, *args, "-n", "-q", "rules"], cwd=REPO).stdout
    assert job_counts(out) == expected_counts(PAPER)


@pytest.mark.parametrize("profile", [[], ["--profile", "slurm"]], ids=["local", "slurm-profile"])
def test_demo_dry_run(profile, tmp_path):
    # the demo's global batch (4) is one process x 4 sequences: on a cluster it trains on one GPU
    gpus = {"HORIZON_GPUS_PER_NODE": "1"}
    args = ["--configfile", str(demo_config(tmp_path)), *in_empty_dir(tmp_path)]
    out = snakemake([*profile, *args, "-n", "-q", "rules"], cwd=REPO, env=gpus).stdout
    assert job_counts(out) == expected_counts(hc.load(REPO / "demo" / "config.yaml"))


def test_dry_run_of_another_grid(tmp_path):
    import yaml

    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg = deep_update(
        raw,
        {
            "horizons": [1024, 2048, 4096],
            "tokenize": {"shards": 3},
            "score": {"shards": 2},
            "refine": {
                "h1": 1024,
                "h2": [4096],
                "rho": [0.1],
                "selections": ["top"],
                "two_stage_full": False,
            },
            "eval": {"repeats": 2, "include_base": False, "prompt_template": "terminus-2-harbor"},
            "report": {"paired": []},
        },
    )
    path = write_config(tmp_path / "grid.yaml", cfg)
    out = snakemake(
        ["--configfile", str(path), *in_empty_dir(tmp_path), "-n", "-q", "rules"], cwd=REPO
    ).stdout
    assert job_counts(out) == expected_counts(hc.validate(cfg))


def test_bad_config_fails_at_parse_time_naming_the_key(tmp_path):
    import yaml

    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    path = write_config(
        tmp_path / "bad.yaml",
        deep_update(raw, {"refine": {"h1": 8192, "h2": [12288], "selections": ["best"]}}),
    )
    proc = snakemake(["--configfile", str(path), "-n"], cwd=REPO, check=False)
    assert proc.returncode != 0
    assert (
        "refine.selections[0]: 'best' is not allowed (allowed: top, bottom, random)"
        in proc.stdout + proc.stderr
    )
