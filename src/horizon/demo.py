"""`make demo`: the whole study in miniature, then the main table and where the time went.

Runs `snakemake --configfile demo/config.yaml --cores N` (the same rules and scripts as the paper
grid; only config differs), then prints the path and content of results/tables/reliability.md and
a per-stage breakdown of the wall time read from Snakemake's own log.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

STAGES = {
    "corpus": (
        "benchmark",
        "collect_corpus",
        "download",
        "normalize",
        "build_student",
        "student",
        "prompt_template",
    ),
    "tokens": ("tokenize", "horizons", "heldout", "pool"),
    "train": ("train_single", "refine"),
    "score": ("score", "merge_scores", "select", "subset_summary", "diagnostics"),
    "rollout": ("rollout",),
    "report": (
        "table_reliability",
        "table_behaviour",
        "table_tasks",
        "table_budget",
        "table_cost",
        "figures",
        "paired",
    ),
}
_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")


def stage_times(log_text: str) -> dict[str, dict]:
    """Per stage: jobs, summed job seconds, and wall span (first start to last finish)."""
    when = None
    starts: dict[str, tuple[str, datetime]] = {}
    spans: dict[str, dict] = {}
    lines = log_text.splitlines()
    for i, line in enumerate(lines):
        m = _STAMP.match(line.strip())
        if m:
            when = datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")
            continue
        r = re.match(r"^(?:local)?rule (\w+):$", line.strip())
        if r and when is not None:
            jid = next(
                (x.split(":")[1].strip() for x in lines[i + 1 : i + 12] if x.strip().startswith("jobid:")),
                None,
            )
            if jid:
                starts[jid] = (r.group(1), when)
        f = re.match(r"^Finished jobid: (\d+) \(Rule: (\w+)\)", line.strip())
        if f and f.group(1) in starts and when is not None:
            rule, t0 = starts.pop(f.group(1))
            stage = next((s for s, rules in STAGES.items() if rule in rules), "other")
            d = spans.setdefault(stage, {"jobs": 0, "job_seconds": 0.0, "first": t0, "last": when})
            d["jobs"] += 1
            d["job_seconds"] += (when - t0).total_seconds()
            d["first"], d["last"] = min(d["first"], t0), max(d["last"], when)
    return spans


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--configfile", default="demo/config.yaml")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--directory", default=".")
    a, extra = ap.parse_known_args(argv)
    snakemake = Path(sys.executable).with_name("snakemake")
    cmd = [
        str(snakemake),
        "--configfile",
        a.configfile,
        "--cores",
        str(a.cores),
        "--directory",
        a.directory,
        "--rerun-incomplete",
        "--printshellcmds",
        *extra,
    ]
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
    logs = sorted((root / ".snakemake" / "log").glob("*.snakemake.log"))
    if logs:
        spans = stage_times(logs[-1].read_text())
        print(
            f"Wall time {wall / 60:.1f} min on {a.cores} cores; by stage (wall span, jobs, summed job time):"
        )
        for stage in [*STAGES, "other"]:
            if stage in spans:
                d = spans[stage]
                span = (d["last"] - d["first"]).total_seconds()
                print(f"  {stage:8s} {span:6.0f} s  {d['jobs']:3d} jobs  {d['job_seconds']:6.0f} s")
    print(f"\nAll tables: {root / 'results' / 'tables'}/   figures: {root / 'results' / 'figures'}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
