"""The grid's names: one grammar for every model and subset of the study, and the grid from config.

A model name is a directory under results/models/, a path segment of the rollouts and a row of
every table. Its grammar is defined here and nowhere else:

    base                              the untrained student
    single-K{K}                       single-stage SFT on the first K tokens of every trajectory
    refine-H{H2}-{selection}-{rho}    refinement from theta1 = single-K{H1} on a subset of the
                                      (H1, H2] scoring pool: top | bottom | random (a fraction rho
                                      of the pool by likelihood under theta1), tor-top | tor-bottom
                                      (by TOR, our reconstruction) or all (rho = 100)
    single-K{K}@{source}              single-stage SFT on another teacher's corpus (corpus.sources)
    dmpo-{policy}                     DMPO preference refinement of {policy} (any of the names above)
                                      on its own successes and failures (horizon.dmpo)

Several sources (a teacher comparison): the first source of `corpus.sources` is the study's corpus
and keeps every name and path of a one-source grid (results/corpus/, results/tokens/, single-K{K},
the refinements); each other source has its data under results/sources/{source}/ (the same layout
as results/) and its single-stage models are named with `@{source}`. So adding a teacher to a
study renames and reruns nothing of it, and a name always says which corpus trained the model.

rho appears as a percentage written without loss (`rho_token`): 0.25 -> "25", 0.333 -> "33.3",
so the path names the configured value and the selection reads the configured value back (never
a rounded percentage). Importing this module must stay cheap: every Slurm job parses the Snakefile.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

SELECTIONS = ("top", "bottom", "random")  # selections by score; `all` is the whole pool
TOR_SELECTIONS = ("tor-top", "tor-bottom")  # selections by trajectory quality (TOR), no scoring needed
ALL = "all"
_SELECTION_ORDER = {"top": 0, "random": 1, "bottom": 2, ALL: 3, "tor-top": 4, "tor-bottom": 5}
RHO = r"\d+(?:\.\d+)?"
SOURCE = r"[A-Za-z0-9][A-Za-z0-9_-]*"  # a corpus.sources name
# the names as Snakemake wildcard patterns (rules use these; ModelName formats them)
SINGLE = "single-K{K}"
REFINE = "refine-H{h2}-{selection}-{rho}"
DMPO = "dmpo-{policy}"
# Snakemake priorities (rules' `priority:`), the order of the jobs ready at one time (a started job is
# never preempted): the study corpus's token views, then another teacher's (short), then the two long
# chains (theta1 -> scores -> subsets -> refinement; the DMPO policy -> its attempts -> pairs -> DMPO),
# then the refinements (theta1's chain goes on: each a training, then its rollouts), then the other
# single-stage models (one training and its rollouts each); rollouts and tables keep Snakemake's
# default 0 and fill the gaps. Only the order changes, never an output.
PRIORITY_DATA, PRIORITY_SOURCE_DATA, PRIORITY_CHAIN, PRIORITY_REFINE, PRIORITY_SINGLE = 5, 4, 3, 2, 1


def rho_token(rho: float) -> str:
    """rho as a percentage without loss or exponent: 0.25 -> '25', 0.333 -> '33.3', 1 -> '100'."""
    return f"{round(rho * 100, 6):.6f}".rstrip("0").rstrip(".")


def _alternation(words) -> str:
    return "|".join(re.escape(w) for w in words)


def selection_pattern() -> str:
    """The `selection` wildcard's constraint: every selection of a subset path."""
    return _alternation((*TOR_SELECTIONS, *SELECTIONS, ALL))


@dataclass(frozen=True)
class ModelName:
    """A parsed model name; `str()` gives it back, `parse()` reads one."""

    kind: str  # base | single | refine | dmpo
    horizon: int | None = None  # K (single) or H2 (refine)
    selection: str | None = None  # refine only
    rho: str | None = None  # refine only: the rho token
    source: str | None = None  # single only: another teacher's corpus (None: the study's corpus)
    policy: ModelName | None = None  # dmpo only: the model it refines (never itself a dmpo model)

    # the SFT models; a dmpo name is "dmpo-" + one of them
    SFT = (
        rf"(?:(?P<base>base)|single-K(?P<k>\d+)(?:@(?P<source>{SOURCE}))?"
        rf"|refine-H(?P<h2>\d+)-(?P<sel>{selection_pattern()})-(?P<rho>{RHO}))"
    )
    PATTERN = re.compile(rf"^(?P<dmpo>dmpo-)?{SFT}$")

    @classmethod
    def base(cls) -> ModelName:
        return cls("base")

    @classmethod
    def single(cls, k: int, source: str | None = None) -> ModelName:
        return cls("single", int(k), source=source)

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
                f"{name!r} is not a model name (base, single-K<K>[@<source>], refine-H<H2>-<selection>-<rho%>, "
                "dmpo-<one of those>)"
            )
        if m["base"]:
            sft = cls.base()
        elif m["k"]:
            sft = cls.single(int(m["k"]), m["source"])
        else:
            sft = cls.refine(int(m["h2"]), m["sel"], m["rho"])
        return cls.dmpo(sft) if m["dmpo"] else sft

    def __str__(self) -> str:
        if self.kind == "base":
            return "base"
        if self.kind == "single":
            return SINGLE.format(K=self.horizon) + (f"@{self.source}" if self.source else "")
        if self.kind == "dmpo":
            return DMPO.format(policy=self.policy)
        return REFINE.format(h2=self.horizon, selection=self.selection, rho=self.rho)

    @property
    def trained(self) -> bool:
        return self.kind != "base"

    @property
    def label(self) -> str:
        """How tables name the model."""
        if self.kind == "base":
            return "base (untrained)"
        if self.kind == "single":
            return f"single-stage K={self.horizon}" + (f" ({self.source})" if self.source else "")
        if self.kind == "dmpo":
            return f"DMPO from {self.policy.label}"
        kept = (
            "all (100%)" if self.selection == ALL else f"{self.selection.replace('tor-', 'TOR-')} {self.rho}%"
        )
        return f"two-stage H2={self.horizon} {kept}"

    @property
    def group(self) -> str:
        """The block of rows a table puts the model in."""
        if self.kind == "base":
            return "reference"
        if self.kind == "single":
            return f"single-stage, teacher {self.source}" if self.source else "single-stage"
        if self.kind == "dmpo":
            return "preference refinement (DMPO)"
        return f"two-stage, H2={self.horizon}"

    @property
    def sort_key(self) -> tuple:
        """Table order: base, single-stage by K, refinements by H2, rho and selection, other teachers'
        models, then DMPO models."""
        if self.kind == "dmpo":
            return (4, *self.policy.sort_key)
        if self.kind == "base":
            return (0, 0, 0.0, 0)
        if self.kind == "single" and self.source:
            return (3, 0, 0.0, 0, self.source, self.horizon)  # other teachers after the study's models
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
    sources: tuple[str, ...] = ()  # corpus.sources names, the study's corpus first; () = corpus.source
    source_horizons: tuple[int, ...] = ()  # K of the other sources' single-stage models
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
        sources = tuple(cfg["corpus"].get("sources") or ())
        source_k = tuple(cfg["corpus"].get("source_horizons") or cfg["horizons"])
        models += [ModelName.single(k, s) for s in sources[1:] for k in source_k]
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
            sources=sources,
            source_horizons=source_k if len(sources) > 1 else (),
            dmpo=dmpo,
        )

    @property
    def model_names(self) -> list[str]:
        return [str(m) for m in self.models]

    @property
    def theta1(self) -> ModelName:
        return ModelName.single(self.h1)

    def priority(self, model: ModelName) -> int:
        """A training job's priority: a model that other training starts from (theta1, the DMPO policy)
        is on a chain; then the refinements, which continue theta1's chain (scores, subsets, a training
        per selection, then their rollouts: the study's longest path), then the other single-stage
        models, each one training and its rollouts."""
        feeds = {self.theta1} | ({self.dmpo.policy} if self.dmpo is not None else set())
        if model in feeds:
            return PRIORITY_CHAIN
        return PRIORITY_SINGLE if model.kind == "single" else PRIORITY_REFINE

    def data_priority(self, source: str | None) -> int:
        """A token view's priority: the study's corpus first (theta1 and the DMPO policy wait on it), then
        another teacher's (a faster teacher's data must not start its student before the chains)."""
        return PRIORITY_DATA if source is None or source == self.primary else PRIORITY_SOURCE_DATA

    @property
    def primary(self) -> str | None:
        """The study's corpus among several sources (None with one `corpus.source`)."""
        return self.sources[0] if self.sources else None

    @property
    def compared(self) -> tuple[str, ...]:
        """The other teachers' sources (each trains single-stage models named single-K{K}@{source})."""
        return self.sources[1:]

    def data_root(self, results: str, source: str | None = None) -> str:
        """Where a source's corpus, tokens and horizons live: results/ for the study's corpus."""
        return results if source in (None, self.primary) else f"{results}/sources/{source}"

    def source_of_root(self, results: str, root: str) -> str | None:
        """The source whose data root is `root` (inverse of data_root)."""
        if root == results:
            return self.primary
        prefix = f"{results}/sources/"
        name = root[len(prefix) :] if root.startswith(prefix) else None
        if name not in self.compared:
            raise KeyError(f"{root} is not the data root of a source (sources: {', '.join(self.sources)})")
        return name

    def horizons_of(self, source: str | None) -> tuple[int, ...]:
        """The single-stage horizons trained on a source's corpus."""
        return self.horizons if source in (None, self.primary) else self.source_horizons

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
