"""The study's configuration: schema validation with defaults, cross-key checks, and the grid.

Everything that turns config into job lists lives here so that the Snakefile, the scripts and the
tests agree on one definition of the grid (model names, subset names, shard counts). Importing this
module must stay cheap: every Slurm job re-parses the Snakefile.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"
SELECTIONS = ("top", "bottom", "random")


class ConfigError(ValueError):
    """A configuration value is missing or not allowed; the message names the key."""


def _key(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def _fill_defaults(schema: Mapping, node: Any) -> None:
    """Fill `default` values of object properties, recursively (jsonschema does not do this)."""
    types = schema.get("type")
    if not isinstance(node, dict) or not (types is None or types == "object" or "object" in types):
        return
    for name, sub in schema.get("properties", {}).items():
        if name not in node and "default" in sub:
            node[name] = copy.deepcopy(sub["default"])
        if name in node:
            _fill_defaults(sub, node[name])
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for name, value in node.items():
            if name not in schema.get("properties", {}):
                _fill_defaults(extra, value)


def load_schema(path: Path = SCHEMA_PATH) -> dict:
    with open(path) as fh:
        return yaml.safe_load(fh)


def validate(config: Mapping, schema_path: Path = SCHEMA_PATH) -> dict:
    """Return a validated copy of `config` with defaults filled; raise ConfigError naming the key."""
    import jsonschema

    schema = load_schema(schema_path)
    cfg = copy.deepcopy(dict(config))
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(cfg), key=lambda e: list(e.absolute_path))
    if errors:
        lines = []
        for err in errors:
            key = _key(err.absolute_path)
            if err.validator == "enum":
                allowed = ", ".join(map(str, err.validator_value))
                lines.append(f"config key {key}: {err.instance!r} is not allowed (allowed: {allowed})")
            elif err.validator == "additionalProperties":
                allowed = ", ".join(sorted(err.schema.get("properties", {})))
                lines.append(f"config key {key}: {err.message} (allowed keys: {allowed})")
            else:
                lines.append(f"config key {key}: {err.message}")
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines))
    _fill_defaults(schema, cfg)
    check_grid(cfg)
    return cfg


def pct(rho: float) -> int:
    """The integer percentage used in subset and model names (0.25 -> 25)."""
    return int(round(rho * 100))


def check_grid(cfg: Mapping) -> None:
    """Cross-key rules that a JSON schema cannot express."""
    horizons = cfg["horizons"]
    for i, k in enumerate(horizons):
        if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
            raise ConfigError(f"config key horizons[{i}]: {k!r} is not a positive integer token count")
    if len(set(horizons)) != len(horizons):
        raise ConfigError(f"config key horizons: duplicate values in {horizons}")
    ref = cfg["refine"]
    h1 = ref["h1"]
    if h1 not in horizons:
        raise ConfigError(
            f"config key refine.h1: {h1} is not one of horizons (allowed: {', '.join(map(str, horizons))}); "
            "theta1 is the single-stage model single-K{h1}"
        )
    for i, h2 in enumerate(ref["h2"]):
        if h2 <= h1:
            raise ConfigError(
                f"config key refine.h2[{i}]: {h2} must be greater than refine.h1 = {h1} (H1 < H2)"
            )
    if len(set(ref["h2"])) != len(ref["h2"]):
        raise ConfigError(f"config key refine.h2: duplicate values in {ref['h2']}")
    seen: dict[int, float] = {}
    for i, rho in enumerate(ref["rho"]):
        if isinstance(rho, bool) or not isinstance(rho, int | float) or not (0 < rho <= 1):
            raise ConfigError(
                f"config key refine.rho[{i}]: {rho!r} is outside (0, 1] (allowed: 0 < rho <= 1)"
            )
        if pct(rho) in seen:
            raise ConfigError(
                f"config key refine.rho[{i}]: {rho} and {seen[pct(rho)]} give the same percentage {pct(rho)}"
            )
        seen[pct(rho)] = rho
    for i, sel in enumerate(ref["selections"]):
        if sel not in SELECTIONS:
            raise ConfigError(
                f"config key refine.selections[{i}]: {sel!r} is unknown (allowed: {', '.join(SELECTIONS)})"
            )
    for name, bench in cfg["eval"]["benchmarks"].items():
        if ("path" in bench) == ("hf" in bench):
            raise ConfigError(f"config key eval.benchmarks.{name}: give exactly one of `path` or `hf`")
    if cfg["eval"]["backend"] == "openai" and not cfg["eval"].get("endpoint"):
        raise ConfigError("config key eval.endpoint: required when eval.backend is openai")
    collect = cfg["corpus"].get("collect")
    if collect and collect["tasks"] not in cfg["eval"]["benchmarks"]:
        raise ConfigError(
            f"config key corpus.collect.tasks: {collect['tasks']!r} is not a benchmark "
            f"(allowed: {', '.join(cfg['eval']['benchmarks'])})"
        )
    for i, k in enumerate(cfg["report"]["rel_k"]):
        if k > cfg["eval"]["attempts"]:
            raise ConfigError(
                f"config key report.rel_k[{i}]: {k} is more than eval.attempts = {cfg['eval']['attempts']}"
            )
    if collect and not cfg["eval"]["prompt_template"]:
        raise ConfigError(
            "config key eval.prompt_template: required with corpus.collect (the corpus does not exist yet)"
        )
    for i, pair in enumerate(cfg.get("report", {}).get("paired", [])):
        names = set(model_names(cfg))
        for m in pair:
            if m not in names:
                raise ConfigError(f"config key report.paired[{i}]: {m!r} is not a model of the grid")


def load(path: str | Path) -> dict:
    """Read and validate a config file (for scripts and tests outside Snakemake)."""
    with open(path) as fh:
        raw = yaml.safe_load(fh) or {}
    return validate(raw)


# ---------------------------------------------------------------------------------------------
# The grid


@dataclass(frozen=True)
class Subset:
    h2: int
    selection: str  # top | bottom | random | all
    pct: int

    @property
    def name(self) -> str:
        return f"{self.selection}-{self.pct}"

    @property
    def model(self) -> str:
        return f"refine-H{self.h2}-{self.selection}-{self.pct}"


def single_model(k: int) -> str:
    return f"single-K{k}"


def subsets(cfg: Mapping) -> list[Subset]:
    """Every refinement subset of the grid, in table order (by H2, then rho, then selection)."""
    ref = cfg["refine"]
    out = []
    for h2 in ref["h2"]:
        for rho in ref["rho"]:
            for sel in ref["selections"]:
                out.append(Subset(h2, sel, pct(rho)))
        if ref["two_stage_full"]:
            out.append(Subset(h2, "all", 100))
    return out


def model_names(cfg: Mapping) -> list[str]:
    """Every model the study evaluates, in table order."""
    names = ["base"] if cfg["eval"].get("include_base") else []
    names += [single_model(k) for k in cfg["horizons"]]
    names += [s.model for s in subsets(cfg)]
    return names


def theta1(cfg: Mapping) -> str:
    return single_model(cfg["refine"]["h1"])


def keep_count(rho: float | int, n: int) -> int:
    """ceil(rho * n), robust to float noise (0.29 * 100 is 28.999...)."""
    return min(n, math.ceil(round(rho * n, 9)))
