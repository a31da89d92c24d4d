"""horizon's own files: the ones it ships (assets/) and the source checkout it may run from.

Nothing here looks at the working directory: a run's paths (results/, a config's relative paths)
are the user's, while the config schema, the DeepSpeed preset and the reference packages' pins
travel with the package (src/horizon/assets/, package data), so an installed horizon and a
workflow used as a Snakemake module of another Snakefile read the same files.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

ASSETS = Path(__file__).resolve().parent / "assets"
CONFIG_SCHEMA = ASSETS / "config.schema.yaml"
REFERENCE_REQUIREMENTS = ASSETS / "reference.txt"


def asset(name: str) -> Path:
    """A file shipped with the package (src/horizon/assets/<name>)."""
    path = ASSETS / name
    if not path.exists():
        raise FileNotFoundError(f"horizon's packaged file {path} is missing (a broken installation?)")
    return path


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
