"""`make demo`: the whole study in miniature, then the main table and where the time went.

Runs `snakemake --configfile demo/config.yaml --profile demo/profile --cores N` (the same rules
and scripts as the paper grid; only config and the local profile differ), then prints
results/tables/reliability.md and a per-stage breakdown of the time, read from the `benchmark:`
files every job writes (results/logs/timing/<stage>/...tsv).
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import time
from pathlib import Path


def timing_dirs(root: Path) -> list[Path]:
    """A run's benchmark folders: the study corpus's under results/, another teacher's under
    results/sources/<name>/."""
    return [root / "results" / "logs" / "timing", *sorted(root.glob("results/sources/*/logs/timing"))]


def stage_times(timing_dirs: Path | list[Path]) -> dict[str, dict]:
    """Per stage: jobs, summed job seconds, summed CPU seconds as Snakemake's benchmark sampled them
    (processes that start and end between two samples are missed: a lower bound), and wall span
    (first start to last finish)."""
    spans: dict[str, dict] = {}
    dirs = [timing_dirs] if isinstance(timing_dirs, Path) else timing_dirs
    for tsv in sorted(t for d in dirs for t in d.rglob("*.tsv")):
        stage = next(tsv.relative_to(d).parts[0] for d in dirs if tsv.is_relative_to(d))
        with open(tsv, newline="") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        if not rows:
            continue
        seconds, end = float(rows[0]["s"]), tsv.stat().st_mtime
        d = spans.setdefault(
            stage, {"jobs": 0, "job_seconds": 0.0, "cpu_seconds": 0.0, "first": end - seconds, "last": end}
        )
        d["jobs"] += 1
        d["job_seconds"] += seconds
        d["cpu_seconds"] += float(rows[0]["cpu_time"] or 0)
        d["first"], d["last"] = min(d["first"], end - seconds), max(d["last"], end)
    return spans


def snakemake_command(
    configfiles: list[str], profile: str, cores: int, directory: str, extra: list[str]
) -> list[str]:
    """The demo's snakemake run on `cores` cores: the cores are job slots, the machine's share is the
    profile's cpu_load resource (percent of a core per job; demo/profile/config.yaml)."""
    return [
        str(Path(sys.executable).with_name("snakemake")),
        "--configfile",
        *configfiles,
        "--profile",
        profile,
        "--cores",
        str(4 * cores),
        "--resources",
        f"cpu_load={100 * cores}",
        "--directory",
        directory,
        *extra,
    ]


def default_profile() -> str:
    """The checkout's demo/profile (make demo runs from the checkout; an installed horizon: ./demo/profile)."""
    from horizon.resources import checkout

    return str((checkout() or Path()) / "demo" / "profile")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "--configfile", nargs="+", default=["demo/config.yaml"], help="later files update earlier ones"
    )
    ap.add_argument("--profile", default=default_profile())
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--directory", default=".")
    a, extra = ap.parse_known_args(argv)
    cmd = snakemake_command(a.configfile, a.profile, a.cores, a.directory, extra)
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.monotonic()
    rc = subprocess.run(cmd).returncode
    wall = time.monotonic() - t0
    if rc != 0:
        print(f"\nthe demo failed (exit {rc}): the failing rule's log is named above", file=sys.stderr)
        return rc
    root = Path(a.directory)
    table = root / "results" / "tables" / "reliability.md"
    print(f"\n{table}\n")
    print(table.read_text())
    spans = stage_times(timing_dirs(root))
    print(f"Wall time {wall / 60:.1f} min on {a.cores} cores; by stage (wall span, jobs, summed job time):")
    for stage, d in sorted(spans.items(), key=lambda kv: kv[1]["first"]):
        print(f"  {stage:8s} {d['last'] - d['first']:6.0f} s  {d['jobs']:3d} jobs  {d['job_seconds']:6.0f} s")
    print(f"\nAll tables: {root / 'results' / 'tables'}/   figures: {root / 'results' / 'figures'}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
