# Config validation, paths, wildcard constraints and input functions shared by every rule.
# Keep this cheap: every Slurm job re-parses the Snakefile.
import os
from pathlib import Path

# horizon is importable in every job, also inside conda environments that hold only its dependencies
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (f"{workflow.basedir}/src", os.environ.get("PYTHONPATH")) if p)

import horizon.config as hc

config.update(hc.validate(config, Path(workflow.basedir) / "workflow/schemas/config.schema.yaml"))

R = config["results"]
SCRIPTS = "../scripts"
ENVS = "../../envs"
HORIZONS = config["horizons"]
H1 = config["refine"]["h1"]
H2S = config["refine"]["h2"]
SUBSETS = hc.subsets(config)
MODELS = hc.model_names(config)
BENCHES = list(config["eval"]["benchmarks"])
REPEATS = list(range(config["eval"]["repeats"]))
TOKEN_SHARDS = [f"{R}/tokens/shard-{i:03d}.parquet" for i in range(config["tokenize"]["shards"])]
SCORE_SHARDS = config["score"]["shards"]
GPU_CONTAINER = config["software"]["container"]  # used with --sdm apptainer (None: no container)


wildcard_constraints:
    i=r"\d{3}",
    K=r"\d+",
    h1=r"\d+",
    h2=r"\d+",
    selection=r"top|bottom|random|all",
    pct=r"\d+",
    model=r"base|single-K\d+|refine-H\d+-(top|bottom|random|all)-\d+",
    bench=r"[A-Za-z0-9_.-]+",
    repeat=r"\d+",


def res(rule_name, key, default):
    """A per-rule resource from config `resources:` (local runs), else the rule's default."""
    return config["resources"].get(rule_name, {}).get(key, default)


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


def benchmark_dir(bench):
    b = config["eval"]["benchmarks"][bench]
    return b["path"] if "path" in b else f"{R}/benchmarks/{bench}"


def model_dir(wildcards):
    return STUDENT if wildcards.model == "base" else f"{R}/models/{wildcards.model}"


def prompt_template():
    return config["eval"]["prompt_template"] or f"{R}/corpus/prompt_template.yaml"


def rollouts(model=None, bench=None):
    paths = [
        f"{R}/rollouts/{m}/{b}/r{r}/attempts.jsonl"
        for m in ([model] if model else MODELS)
        for b in ([bench] if bench else BENCHES)
        for r in REPEATS
    ]
    if config["report"]["allow_partial"]:  # tables from what exists now
        paths = [p for p in paths if Path(p).exists()]
    return paths


def trained_models():
    """Model directories (each holds timing.json; a file inside a directory output cannot be an input)."""
    return [f"{R}/models/{m}" for m in MODELS if m != "base"]


TABLES = ["reliability", "cost", "behaviour", "budget", "tasks"]


def all_targets():
    return [
        *[f"{R}/tables/{t}.md" for t in TABLES],
        *[f"{R}/tables/paired-{a}-vs-{b}.md" for a, b in config["report"]["paired"]],
        *[f"{R}/figures/passk-{b}.png" for b in BENCHES],
        f"{R}/subsets/summary.csv",
        f"{R}/diagnostics/bias.csv",
    ]
