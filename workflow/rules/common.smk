# Config validation, the grid, paths, wildcard constraints and input functions shared by every rule.
# Keep this cheap: every Slurm job re-parses the Snakefile.
import os
from pathlib import Path

# horizon is importable in every job (it is set here, not read: jobs inherit it), also inside a
# container that holds only its dependencies
os.environ.update(
    PYTHONPATH=os.pathsep.join(p for p in (f"{workflow.basedir}/src", os.environ.get("PYTHONPATH")) if p)
)

import horizon.config as hc
from horizon.grid import Grid, wildcard_pattern, RHO, SINGLE, REFINE

config.update(hc.validate(config, Path(workflow.basedir) / "workflow/schemas/config.schema.yaml"))

G = Grid.from_config(config)
R = config["results"]
SCRIPTS = "../scripts"
MODELS = G.model_names
TOKEN_SHARDS = [f"{R}/tokens/shard-{i:03d}.parquet" for i in range(config["tokenize"]["shards"])]
SCORE_SHARDS = config["score"]["shards"]


# One image for every rule, used with `--sdm apptainer` (README: Software); without it, rules run
# in the environment Snakemake runs in.
container: config["software"]["container"]


wildcard_constraints:
    i=r"\d{3}",
    K=r"\d+",
    h1=r"\d+",
    h2=r"\d+",
    selection=r"top|bottom|random|all",
    rho=RHO,
    model=wildcard_pattern(),
    bench=r"[A-Za-z0-9_.-]+",
    repeat=r"\d+",


def timing(stage, name):
    """The `benchmark:` file of a job: results/logs/timing/<stage>/<name>.tsv (the demo sums them by stage)."""
    return f"{R}/logs/timing/{stage}/{name}.tsv"


# The student: an HF id is fetched once (on the login node) into the HF cache; a local directory is
# used in place; with student.build the workflow builds it (tests, demo). Every consumer reads
# the resolved local path from this small file.
STUDENT = f"{R}/student/student.json"


def student_build_output():
    return config["student"]["model"] if config["student"].get("build") else []


def corpus_source_input():
    """The corpus files as inputs when local (so edits rerun normalize); nothing for a hub id."""
    src = config["corpus"]["source"]
    if config["corpus"].get("collect") or Path(src).exists():
        return src
    return []


def model_dir(wildcards):
    return STUDENT if wildcards.model == "base" else f"{R}/models/{wildcards.model}"


def prompt_template():
    return config["eval"]["prompt_template"] or f"{R}/corpus/prompt_template.yaml"


def subset_file(s):
    return f"{R}/subsets/H{s.h2}/{s.name}.parquet"


def rollouts(model=None, bench=None):
    paths = [
        f"{R}/rollouts/{m}/{b}/r{r}/attempts.jsonl"
        for m in ([model] if model else MODELS)
        for b in ([bench] if bench else G.benches)
        for r in G.repeats
    ]
    if config["report"]["allow_partial"]:  # tables from what exists now
        paths = [p for p in paths if Path(p).exists()]
    return paths


def trained_models():
    """Model directories (each holds timing.json; a file inside a directory output cannot be an input)."""
    return [f"{R}/models/{m}" for m in G.models if m.trained]


def all_targets():
    return [
        *[f"{R}/tables/{t}.md" for t in TABLES],
        *[f"{R}/tables/paired-{a}-vs-{b}.md" for a, b in config["report"]["paired"]],
        *[f"{R}/figures/passk-{b}.png" for b in G.benches],
        f"{R}/subsets/summary.csv",
        f"{R}/diagnostics/bias.csv",
        *[f"{R}/horizons/K{k}.parquet" for k in G.horizons],  # what each horizon keeps, per trajectory
    ]


# DMPO (workflow/rules/dmpo.smk)
def policy_dir(wildcards):
    """The policy's weights (base: the student, read through student.json by the scripts)."""
    return STUDENT if wildcards.policy == "base" else f"{R}/models/{wildcards.policy}"


def dmpo_train_settings():
    """train.* with DMPO's own learning rate and epochs."""
    return {**config["train"], "lr": config["dmpo"]["lr"], "epochs": config["dmpo"]["epochs"]}
