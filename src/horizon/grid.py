"""The grid's names: one grammar for every model and subset of the study, and the grid from config.

A model name is a directory under results/models/, a path segment of the rollouts and a row of
every table. Its grammar is defined here and nowhere else:

    base                              the untrained student
    single-K{K}                       single-stage SFT on the first K tokens of every trajectory
    refine-H{H2}-{selection}-{rho}    refinement from theta1 = single-K{H1} on a subset of the
                                      (H1, H2] scoring pool: top | bottom | random (a fraction rho
                                      of the pool) or all (rho = 100)
    dmpo-{policy}                     DMPO preference refinement of {policy} (any of the names above)
                                      on its own successes and failures (horizon.dmpo)

rho appears as a percentage written without loss (`rho_token`): 0.25 -> "25", 0.333 -> "33.3",
so the path names the configured value and the selection reads the configured value back (never
a rounded percentage). Importing this module must stay cheap: every Slurm job parses the Snakefile.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

SELECTIONS = ("top", "bottom", "random")  # selections by score; `all` is the whole pool
ALL = "all"
_SELECTION_ORDER = {"top": 0, "random": 1, "bottom": 2, ALL: 3}
RHO = r"\d+(?:\.\d+)?"
# the names as Snakemake wildcard patterns (rules use these; ModelName formats them)
SINGLE = "single-K{K}"
REFINE = "refine-H{h2}-{selection}-{rho}"
DMPO = "dmpo-{policy}"


def rho_token(rho: float) -> str:
    """rho as a percentage without loss or exponent: 0.25 -> '25', 0.333 -> '33.3', 1 -> '100'."""
    return f"{round(rho * 100, 6):.6f}".rstrip("0").rstrip(".")


def _alternation(words) -> str:
    return "|".join(re.escape(w) for w in words)


@dataclass(frozen=True)
class ModelName:
    """A parsed model name; `str()` gives it back, `parse()` reads one."""

    kind: str  # base | single | refine | dmpo
    horizon: int | None = None  # K (single) or H2 (refine)
    selection: str | None = None  # refine only
    rho: str | None = None  # refine only: the rho token
    policy: ModelName | None = None  # dmpo only: the model it refines (never itself a dmpo model)

    # the SFT models; a dmpo name is "dmpo-" + one of them
    SFT = rf"(?:(?P<base>base)|single-K(?P<k>\d+)|refine-H(?P<h2>\d+)-(?P<sel>{_alternation((*SELECTIONS, ALL))})-(?P<rho>{RHO}))"
    PATTERN = re.compile(rf"^(?P<dmpo>dmpo-)?{SFT}$")

    @classmethod
    def base(cls) -> ModelName:
        return cls("base")

    @classmethod
    def single(cls, k: int) -> ModelName:
        return cls("single", int(k))

    @classmethod
    def refine(cls, h2: int, selection: str, rho: str) -> ModelName:
        return cls("refine", int(h2), selection, rho)

    @classmethod
    def dmpo(cls, policy: ModelName | str) -> ModelName:
        policy = cls.parse(policy) if isinstance(policy, str) else policy
        if policy.kind == "dmpo":
            raise ValueError(f"dmpo-{policy}: the policy of a DMPO model is an SFT model, not {policy}")
        return cls("dmpo", policy=policy)

    @classmethod
    def parse(cls, name: str) -> ModelName:
        m = cls.PATTERN.match(name)
        if not m:
            raise ValueError(
                f"{name!r} is not a model name (base, single-K<K>, refine-H<H2>-<selection>-<rho%>, "
                "dmpo-<one of those>)"
            )
        if m["base"]:
            sft = cls.base()
        elif m["k"]:
            sft = cls.single(int(m["k"]))
        else:
            sft = cls.refine(int(m["h2"]), m["sel"], m["rho"])
        return cls.dmpo(sft) if m["dmpo"] else sft

    def __str__(self) -> str:
        if self.kind == "base":
            return "base"
        if self.kind == "single":
            return SINGLE.format(K=self.horizon)
        if self.kind == "dmpo":
            return DMPO.format(policy=self.policy)
        return REFINE.format(h2=self.horizon, selection=self.selection, rho=self.rho)

    @property
    def trained(self) -> bool:
        return self.kind != "base"

    @property
    def label(self) -> str:
        """How tables name the model."""
        if self.kind == "dmpo":
            return f"DMPO from {self.policy.label}"
        if self.kind == "base":
            return "base (untrained)"
        if self.kind == "single":
            return f"single-stage K={self.horizon}"
        kept = "all (100%)" if self.selection == ALL else f"{self.selection} {self.rho}%"
        return f"two-stage H2={self.horizon} {kept}"

    @property
    def group(self) -> str:
        """The block of rows a table puts the model in."""
        if self.kind == "dmpo":
            return "preference refinement (DMPO)"
        if self.kind == "base":
            return "reference"
        if self.kind == "single":
            return "single-stage"
        return f"two-stage, H2={self.horizon}"

    @property
    def sort_key(self) -> tuple:
        """Table order: base, single-stage by K, refinements by H2, rho and selection, then DMPO models."""
        if self.kind == "dmpo":
            return (3, *self.policy.sort_key)
        if self.kind == "base":
            return (0, 0, 0.0, 0)
        if self.kind == "single":
            return (1, self.horizon, 0.0, 0)
        return (2, self.horizon, float(self.rho), _SELECTION_ORDER[self.selection])


def wildcard_pattern() -> str:
    """The `model` wildcard's constraint: the grammar without anchors or named groups."""
    return re.sub(r"\(\?P<\w+>", "(?:", ModelName.PATTERN.pattern[1:-1])


def policy_pattern() -> str:
    """The `policy` wildcard's constraint (the models a DMPO model can refine): no dmpo- prefix."""
    return re.sub(r"\(\?P<\w+>", "(?:", ModelName.SFT)


def default_policy(cfg: Mapping) -> str:
    """dmpo.policy when config leaves it null: the Top selection at the largest H2 and rho of the grid
    (the paper grid: refine-H16384-top-75), else the single-stage model at the longest horizon."""
    ref = cfg["refine"]
    if "top" in ref["selections"] and ref["rho"]:
        return str(ModelName.refine(max(ref["h2"]), "top", rho_token(max(ref["rho"]))))
    return str(ModelName.single(max(cfg["horizons"])))


def order_models(names) -> list[str]:
    return sorted(names, key=lambda n: ModelName.parse(n).sort_key)


@dataclass(frozen=True)
class Subset:
    """One refinement subset: `selection` of the (H1, H2] pool at fraction `rho`."""

    h2: int
    selection: str  # top | bottom | random | all
    rho: float

    @property
    def token(self) -> str:
        return rho_token(self.rho)

    @property
    def name(self) -> str:
        """The subset file's stem: results/subsets/H{h2}/{name}.parquet."""
        return f"{self.selection}-{self.token}"

    @property
    def model(self) -> ModelName:
        return ModelName.refine(self.h2, self.selection, self.token)


@dataclass(frozen=True)
class Grid:
    """Everything config says about what runs: horizons, subsets, models, benchmarks, repeats."""

    horizons: tuple[int, ...]
    h1: int
    h2s: tuple[int, ...]
    subsets: tuple[Subset, ...]
    models: tuple[ModelName, ...]
    benches: tuple[str, ...]
    repeats: tuple[int, ...]
    _rho: dict = field(default_factory=dict, compare=False, repr=False)
    dmpo: ModelName | None = None  # the DMPO model when dmpo.enabled (its policy is dmpo.policy)

    @classmethod
    def from_config(cls, cfg: Mapping) -> Grid:
        ref = cfg["refine"]
        subsets = []
        for h2 in ref["h2"]:
            for rho in ref["rho"]:
                subsets += [Subset(h2, sel, rho) for sel in ref["selections"]]
            if ref["two_stage_full"]:
                subsets.append(Subset(h2, ALL, 1.0))
        models = [ModelName.base()] if cfg["eval"].get("include_base") else []
        models += [ModelName.single(k) for k in cfg["horizons"]]
        models += [s.model for s in subsets]
        dmpo_cfg = cfg.get("dmpo") or {}
        dmpo = None
        if dmpo_cfg.get("enabled"):
            dmpo = ModelName.dmpo(dmpo_cfg.get("policy") or default_policy(cfg))
            models.append(dmpo)
        return cls(
            horizons=tuple(cfg["horizons"]),
            h1=ref["h1"],
            h2s=tuple(ref["h2"]),
            subsets=tuple(subsets),
            models=tuple(models),
            benches=tuple(cfg["eval"]["benchmarks"]),
            repeats=tuple(range(cfg["eval"]["repeats"])),
            _rho={(s.h2, s.selection, s.token): s.rho for s in subsets},
            dmpo=dmpo,
        )

    @property
    def model_names(self) -> list[str]:
        return [str(m) for m in self.models]

    @property
    def theta1(self) -> ModelName:
        return ModelName.single(self.h1)

    def subset(self, h2: int | str, selection: str, token: str) -> Subset:
        """The configured subset behind a path's (H2, selection, rho token)."""
        key = (int(h2), selection, token)
        if key not in self._rho:
            raise KeyError(f"no subset H{h2}/{selection}-{token} in the grid")
        return Subset(int(h2), selection, self._rho[key])


@dataclass(frozen=True)
class RolloutPath:
    """The parts of results/rollouts/{model}/{bench}/r{repeat}/attempts.jsonl."""

    model: str
    bench: str
    repeat: int

    PATTERN = re.compile(r"rollouts/(?P<model>[^/]+)/(?P<bench>[^/]+)/r(?P<repeat>\d+)/attempts\.jsonl$")

    def path(self, results: str) -> str:
        return f"{results}/rollouts/{self.model}/{self.bench}/r{self.repeat}/attempts.jsonl"


def parse_rollout_path(path) -> RolloutPath:
    m = RolloutPath.PATTERN.search(str(path))
    if not m:
        raise ValueError(f"not a rollout path (…/rollouts/<model>/<bench>/r<repeat>/attempts.jsonl): {path}")
    return RolloutPath(m["model"], m["bench"], int(m["repeat"]))
