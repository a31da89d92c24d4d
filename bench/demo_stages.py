#!/usr/bin/env python
"""Where a finished run's time went, per stage, from the rules' `benchmark:` files.

  python bench/demo_stages.py [RUN_DIR ...]     # each RUN_DIR holds results/logs/timing/ (default: .)

Per stage (the first folder under results/logs/timing/): the jobs, their summed wall time and their
summed `cpu_time` as Snakemake's benchmark recorded it. Snakemake samples a job's process tree at
intervals, so processes that start and end between two samples (a sandbox's commands, a grader) are
missed: the CPU column is a lower bound; the whole run's CPU is measured outside (a cgroup, or `time`).
With two RUN_DIRs the second column set is printed beside the first with the ratio (the first is the
baseline).
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from pathlib import Path


def stages(run: Path) -> dict[str, list[float]]:
    """stage -> [jobs, wall s, cpu s]"""
    root = run / "results" / "logs" / "timing"
    if not root.is_dir():
        raise SystemExit(f"{root}: no benchmark files (run the workflow there first)")
    out: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for f in sorted(root.rglob("*.tsv")):
        stage = f.relative_to(root).parts[0]
        with open(f, newline="") as fh:
            for row in csv.DictReader(fh, delimiter="\t"):
                rec = out[stage]
                rec[0] += 1
                rec[1] += float(row["s"])
                rec[2] += float(row["cpu_time"] or 0)
    out["total"] = [sum(v[i] for v in list(out.values())) for i in range(3)]
    return dict(out)


def main(argv: list[str]) -> int:
    runs = [Path(a) for a in argv] or [Path(".")]
    tables = [stages(r) for r in runs]
    names = sorted({s for t in tables for s in t if s != "total"}) + ["total"]
    print(
        "stage      "
        + "".join(f"| {r.name or '.':>24s} " for r in runs)
        + ("| ratio wall, cpu" if len(runs) == 2 else "")
    )
    for s in names:
        cells = [t.get(s, [0, 0.0, 0.0]) for t in tables]
        line = f"{s:10s} " + "".join(f"| {int(n):3d} jobs {w:6.0f} s {c:5.0f} cpu " for n, w, c in cells)
        if len(cells) == 2 and cells[0][1] and cells[0][2]:
            line += f"| x{cells[1][1] / cells[0][1]:.2f}, x{cells[1][2] / cells[0][2]:.2f}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
