"""The study's configuration: Snakemake's schema validation with defaults, and the cross-key checks.

`validate` runs `snakemake.utils.validate(config, schema, set_default=True)` (bounds, enums,
uniqueness and defaults all live in workflow/schemas/config.schema.yaml) and turns its first error
into a message naming the key. The checks below are only those a schema cannot state: relations
between keys. The grid itself (model names, subsets) is horizon.grid. Importing this module must
stay cheap: every Slurm job re-parses the Snakefile.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"
MOVED = {
    "resources": "per-rule resources live in a profile: slurm/ for the cluster, demo/profile/ for the demo"
}


class ConfigError(ValueError):
    """A configuration value is missing or not allowed; the message names the key."""


def _key(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def _describe(err) -> str:
    """One line for a jsonschema ValidationError, naming the key and what is allowed."""
    key = _key(err.absolute_path)
    if err.validator == "enum":
        allowed = ", ".join(map(str, err.validator_value))
        return f"config key {key}: {err.instance!r} is not allowed (allowed: {allowed})"
    if err.validator == "additionalProperties":
        allowed = ", ".join(sorted(err.schema.get("properties", {})))
        return f"config key {key}: {err.message} (allowed keys: {allowed})"
    return f"config key {key}: {err.message}"


def validate(config: Mapping, schema_path: Path = SCHEMA_PATH) -> dict:
    """Return a validated copy of `config` with defaults filled; raise ConfigError naming the key."""
    import jsonschema
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate as snakemake_validate

    cfg = copy.deepcopy(dict(config))
    for key, where in MOVED.items():
        if key in cfg:
            raise ConfigError(f"config key {key}: no longer a config key ({where})")
    try:
        snakemake_validate(cfg, str(schema_path), set_default=True)
    except WorkflowError as e:
        cause = e.__context__
        if isinstance(cause, jsonschema.ValidationError):
            raise ConfigError("invalid configuration:\n  " + _describe(cause)) from None
        raise ConfigError(f"invalid configuration: {e}") from None
    check_grid(cfg)
    return cfg


def _allowed(values) -> str:
    return ", ".join(map(str, values))


def check_grid(cfg: Mapping) -> None:
    """Relations between keys, which a JSON schema cannot express."""
    from horizon.grid import Grid

    horizons, ref = cfg["horizons"], cfg["refine"]
    if ref["h1"] not in horizons:
        raise ConfigError(
            f"config key refine.h1: {ref['h1']} is not one of horizons (allowed: {_allowed(horizons)}); "
            "theta1 is the single-stage model single-K{h1}"
        )
    for i, h2 in enumerate(ref["h2"]):
        if h2 <= ref["h1"]:
            raise ConfigError(
                f"config key refine.h2[{i}]: {h2} must be greater than refine.h1 = {ref['h1']} (H1 < H2)"
            )
    ev = cfg["eval"]
    for name, bench in ev["benchmarks"].items():
        if ("path" in bench) == ("hf" in bench):
            raise ConfigError(f"config key eval.benchmarks.{name}: give exactly one of `path` or `hf`")
    if ev["backend"] == "openai" and not ev.get("endpoint"):
        raise ConfigError("config key eval.endpoint: required when eval.backend is openai")
    for i, k in enumerate(cfg["report"]["rel_k"]):
        if k > ev["attempts"]:
            raise ConfigError(
                f"config key report.rel_k[{i}]: {k} is more than eval.attempts = {ev['attempts']}"
            )
    collect = cfg["corpus"].get("collect")
    if collect and collect["tasks"] not in ev["benchmarks"]:
        raise ConfigError(
            f"config key corpus.collect.tasks: {collect['tasks']!r} is not a benchmark "
            f"(allowed: {_allowed(ev['benchmarks'])})"
        )
    if collect and not ev["prompt_template"]:
        raise ConfigError(
            "config key eval.prompt_template: required with corpus.collect (the corpus does not exist yet)"
        )
    _check_dmpo(cfg)
    names = set(Grid.from_config(cfg).model_names)
    for i, pair in enumerate(cfg["report"]["paired"]):
        for m in pair:
            if m not in names:
                raise ConfigError(f"config key report.paired[{i}]: {m!r} is not a model of the grid")


def load(path: str | Path) -> dict:
    """Read and validate a config file (for scripts and tests outside Snakemake)."""
    with open(path) as fh:
        raw = yaml.safe_load(fh) or {}
    return validate(raw)


def _same_place(a: Mapping, b: Mapping) -> bool:
    """Two task sets that name the same directory or the same hub dataset."""
    if a.get("hf") or b.get("hf"):
        return a.get("hf") == b.get("hf")
    return Path(a["path"]).resolve() == Path(b["path"]).resolve()


def _check_dmpo(cfg: Mapping) -> None:
    """DMPO's policy is a model of the grid; its training tasks are given and are not a benchmark."""
    from horizon.grid import Grid, ModelName, default_policy

    d = cfg.get("dmpo") or {}
    if not d.get("enabled"):
        return
    policy = d.get("policy") or default_policy(cfg)
    try:
        kind = ModelName.parse(policy).kind
    except ValueError as e:
        raise ConfigError(f"config key dmpo.policy: {e}") from None
    names = [str(m) for m in Grid.from_config({**cfg, "dmpo": {}}).models]
    if kind == "dmpo" or (policy not in names and policy != "base"):
        raise ConfigError(
            f"config key dmpo.policy: {policy!r} is not an SFT model of the grid (allowed: {_allowed(names)})"
        )
    tasks = d.get("tasks")
    if not tasks:
        raise ConfigError("config key dmpo.tasks: required when dmpo.enabled (the training task set)")
    if ("path" in tasks) == ("hf" in tasks):
        raise ConfigError("config key dmpo.tasks: give exactly one of `path` or `hf`")
    for name, bench in cfg["eval"]["benchmarks"].items():
        if _same_place(tasks, bench):
            raise ConfigError(
                f"config key dmpo.tasks: {tasks.get('path') or tasks.get('hf')} is the evaluated benchmark "
                f"{name!r}; DMPO trains on a task set kept apart from every benchmark"
            )
