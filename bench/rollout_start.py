#!/usr/bin/env python
"""What a rollout job spends before its first attempt, in CPU seconds: the imports (torch,
transformers, the rollout code) and the grader toolchain it builds, against a bare Python start
(the baseline) in the same run.

  python bench/rollout_start.py [--runs 3] [--jobs 20]

Each figure is the median over --runs fresh processes (CPU of the child and everything it waited
for, from getrusage). --jobs rollout jobs (the demo runs 20) times the start is what rollout jobs
sharing one process would save (docs/performance.md, the demo).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile

CASES = {
    "python start (baseline)": "pass",
    "imports": (
        "import torch, transformers\n"
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "import horizon.eval.rollout"
    ),
    "grader toolchain": (
        "import pathlib, sys\n"
        "from horizon.eval.sandbox import toolchain\n"
        "toolchain.build(pathlib.Path(sys.argv[1]) / 'tc')"
    ),
}


def child_cpu(code: str, workdir: str) -> float:
    """CPU seconds (user + system) of one fresh interpreter running code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code, workdir], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=20, help="rollout jobs of the run (the demo's: 20)")
    a = ap.parse_args()
    runs = a.runs
    medians = {}
    for name, code in CASES.items():
        times = []
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as d:
                times.append(child_cpu(code, d))
        medians[name] = statistics.median(times)
        print(f"{name:24s} {medians[name]:6.2f} CPU-s (runs: {', '.join(f'{t:.2f}' for t in times)})")
    base = medians["python start (baseline)"]
    for name in ("imports", "grader toolchain"):
        print(f"{name}: {medians[name] / base:.0f}x the baseline")
    # the toolchain's run includes a python start and its own imports: count them once
    start = medians["imports"] + medians["grader toolchain"] - base
    print(
        f"a rollout job's start, about {start:.1f} CPU-s; for {a.jobs} jobs about {a.jobs * start:.0f} CPU-s"
    )


if __name__ == "__main__":
    main()
