"""horizon's own files: the ones it ships (assets/) and the source checkout it may run from.

Nothing here looks at the working directory: a run's paths (results/, a config's relative paths)
are the user's, while the config schema, the DeepSpeed preset, the judge rubric, the synthesis
prompts and the reference packages' pins travel with the package (src/horizon/assets/, package
data; workflow/ links to them), so an installed horizon and a workflow used as a Snakemake module of
another Snakefile, from a local checkout or fetched from a remote source, read the same files.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

ASSETS = Path(__file__).resolve().parent / "assets"
CONFIG_SCHEMA = ASSETS / "config.schema.yaml"
REFERENCE_REQUIREMENTS = ASSETS / "reference.txt"
# workflow/<key> of the repository is a link to assets/<value>: what a rule reads by default
WORKFLOW_LINKS = {
    "schemas/config.schema.yaml": "config.schema.yaml",
    "deepspeed/zero3.json": "deepspeed/zero3.json",
    "judge/rubric.yaml": "judge/rubric.yaml",
    "synth/prompts": "synth/prompts",
}


def asset(name: str) -> Path:
    """A file shipped with the package (src/horizon/assets/<name>)."""
    path = ASSETS / name
    if not path.exists():
        raise FileNotFoundError(f"horizon's packaged file {path} is missing (a broken installation?)")
    return path


def workflow_file(name: str, root: Path | None) -> Path:
    """workflow/<name> (a key of WORKFLOW_LINKS) of the checkout `root` the workflow runs from; the
    installed package's copy when there is none (a workflow fetched from a remote source, where the
    links would not resolve)."""
    packaged = WORKFLOW_LINKS[name]  # KeyError: not one of the packaged files
    return root / "workflow" / name if root is not None else asset(packaged)


def checkout() -> Path | None:
    """The repository horizon is imported from (its src/ layout, next to the Snakefile); None when
    horizon is installed as a package. Things `make` builds there (.venv-harbor, envs/horizon.sif,
    the profiles) are looked up in it."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "Snakefile").is_file() and (root / "src" / "horizon").is_dir() else None


def made_in_checkout(path: str | Path, root: Path | None = None) -> Path:
    """A path to something `make` builds in the checkout (.venv-harbor, envs/horizon.sif): as given when
    absolute or present in the working directory, else the checkout's (`root`, default the one horizon
    runs from) when it holds one; as given otherwise (the caller's error names it)."""
    given = Path(path)
    root = root or checkout()
    if given.is_absolute() or given.exists() or root is None or not (root / given).exists():
        return given
    return root / given


@cache
def reference_pins() -> dict[str, str]:
    """{distribution name: its requirement} of the reference environment, as reference.txt pins them."""
    pins = {}
    for line in REFERENCE_REQUIREMENTS.read_text().splitlines():
        req = line.split("#", 1)[0].strip()
        if req:
            pins[re.split(r"[=<>!~\[ ;]", req, maxsplit=1)[0]] = req
    return pins
