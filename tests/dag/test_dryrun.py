"""Dry-runs of the paper grid as users type them: job counts per rule computed from config."""

import pytest

from horizon import config as hc
from tests.helpers import REPO, deep_update, job_counts, snakemake, write_config


def expected_counts(cfg: dict) -> dict[str, int]:
    ref = cfg["refine"]
    n_subsets = len(ref["h2"]) * (len(ref["rho"]) * len(ref["selections"]) + int(ref["two_stage_full"]))
    n_models = (
        len(cfg["horizons"]) + n_subsets + int(cfg["eval"]["include_base"]) + int(cfg["dmpo"]["enabled"])
    )
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
        "figures": 1,
        "all": 1,
    }
    if cfg["report"]["paired"]:
        counts["paired"] = len(cfg["report"]["paired"])
    if cfg["eval"]["prompt_template"] is None:
        counts["prompt_template"] = 1
    if cfg["student"].get("build"):
        counts["build_student"] = 1
    if cfg["corpus"].get("collect"):
        counts["collect_corpus"] = 1
    if cfg["dmpo"]["enabled"]:  # preference data, the DMPO run, and its rollouts (counted in n_models above)
        counts |= {"dmpo_tasks": 1, "dmpo_rollout": cfg["dmpo"]["rollout_shards"], "dmpo_pairs": 1,
                   "dmpo_reference": 1, "dmpo_train": 1}  # fmt: skip
    return counts


PAPER = hc.load(REPO / "config.yaml")


def test_paper_grid_counts_match_config():
    c = expected_counts(PAPER)
    # the paper grid, spelled out once: 25 models (base, 4 single-stage, 2 x (9 + 1) refinements)
    assert c["rollout"] == 25 * 2 * 4 and c["refine"] == 20 and c["train_single"] == 4


@pytest.mark.parametrize("profile", [[], ["--profile", "slurm"]], ids=["local", "slurm-profile"])
def test_full_grid_dry_run(profile):
    out = snakemake([*profile, "-n", "-q", "rules"], cwd=REPO).stdout
    assert job_counts(out) == expected_counts(PAPER)


@pytest.mark.parametrize("profile", [[], ["--profile", "slurm"]], ids=["local", "slurm-profile"])
def test_demo_dry_run(profile):
    out = snakemake([*profile, "--configfile", "demo/config.yaml", "-n", "-q", "rules"], cwd=REPO).stdout
    assert job_counts(out) == expected_counts(hc.load(REPO / "demo" / "config.yaml"))


@pytest.mark.parametrize("profile", [[], ["--profile", "slurm"]], ids=["local", "slurm-profile"])
def test_paper_grid_with_dmpo_enabled_lists_the_extra_jobs(tmp_path, profile):
    import yaml

    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    raw["dmpo"]["enabled"] = True
    path = write_config(tmp_path / "grid.yaml", raw)
    out = snakemake([*profile, "--configfile", str(path), "-n", "-q", "rules"], cwd=REPO).stdout
    counts = job_counts(out)
    assert counts == expected_counts(hc.validate(raw))
    # 8 preference rollout shards, pairs, reference, the DMPO run, and 2 benchmarks x 4 repeats of its rollouts
    assert counts["dmpo_rollout"] == 8 and counts["dmpo_train"] == 1 and counts["rollout"] == 26 * 2 * 4


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
            "eval": {"repeats": 2, "include_base": False},
            "report": {"paired": []},
        },
    )
    path = write_config(tmp_path / "grid.yaml", cfg)
    out = snakemake(["--configfile", str(path), "-n", "-q", "rules"], cwd=REPO).stdout
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
