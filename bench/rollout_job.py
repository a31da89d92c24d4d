#!/usr/bin/env python
"""One whole rollout job of the demo, the code now against a baseline revision, alternating, in CPU
seconds of the whole machine (from /proc/stat: the job, Snakemake's start, the sandboxes, tmux and the
graders together), and whether both wrote the same attempts.

  python bench/rollout_job.py [--baseline 08b7f3b] [--rounds 4] [--model single-K640]

Needs the demo's models (`make demo` first) and an otherwise idle machine. The baseline runs from a
git worktree of that revision (made under /tmp, removed afterwards) with this checkout's environment
and results: only the package's code differs. Each round runs `snakemake <the model's r0 attempts>
--forcerun rollout` once per side, the order alternating; the medians are printed, then the fields in
which attempts differ between two runs of one side and between the sides (the timing fields always;
anything else is a terminal interleaving, which eval.capture: idle narrows but cannot rule out).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent not idle (user, nice, system, irq, softirq, steal)."""
    v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def run_job(target: str, pythonpath: str | None) -> tuple[float, float, list[dict]]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    cmd = [str(Path(sys.executable).parent / "snakemake"), target, "--configfile", "demo/config.yaml",
           "--profile", "demo/profile", "--cores", "8", "--forcerun", "rollout", "--allowed-rules",
           "rollout", "--resources", "cpu_load=200", "-q"]  # fmt: skip
    cpu, wall = busy_seconds(), time.monotonic()
    subprocess.run(cmd, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cpu, wall = busy_seconds() - cpu, time.monotonic() - wall
    rows = [json.loads(line) for line in (REPO / target).read_text().splitlines() if line.strip()]
    return cpu, wall, rows


def differing_fields(a: list[dict], b: list[dict]) -> set[str]:
    key = lambda r: (r["task"], r["attempt"])  # noqa: E731
    a_by, b_by = {key(r): r for r in a}, {key(r): r for r in b}
    if a_by.keys() != b_by.keys():
        return {"<attempts>"}
    return {f for k in a_by for f in a_by[k].keys() | b_by[k].keys() if a_by[k].get(f) != b_by[k].get(f)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", default="08b7f3b")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--model", default="single-K640")
    a = ap.parse_args()
    target = f"results/rollouts/{a.model}/demo/r0/attempts.jsonl"
    if not (REPO / "results/models" / a.model).is_dir():
        raise SystemExit(f"results/models/{a.model}: run `make demo` first")
    tree = Path(tempfile.mkdtemp(prefix="bench-rollout-job-")) / "baseline"
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(tree), a.baseline], cwd=REPO, check=True)
    sides = {"now": None, f"baseline {a.baseline}": str(tree / "src")}
    got: dict[str, list[tuple[float, float]]] = {s: [] for s in sides}
    attempts: dict[str, list[list[dict]]] = {s: [] for s in sides}
    try:
        for r in range(a.rounds):
            for side in list(sides) if r % 2 == 0 else list(sides)[::-1]:
                cpu, wall, rows = run_job(target, sides[side])
                got[side].append((cpu, wall))
                attempts[side].append(rows)
                episodes = sum(row["episodes"] for row in rows)  # attempts may differ run to run
                print(f"round {r + 1} {side}: {cpu:.2f} CPU-s, {wall:.2f} s, {episodes} episodes "
                      f"({1000 * cpu / max(1, episodes):.0f} CPU-ms an episode)", flush=True)  # fmt: skip
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, check=False)
    for side, runs in got.items():
        cpu, wall = statistics.median(c for c, _ in runs), statistics.median(w for _, w in runs)
        print(f"{side:>24}: median {cpu:.2f} CPU-s, {wall:.2f} s wall over {len(runs)} runs")
    now, base = (statistics.median(c for c, _ in got[s]) for s in sides)
    print(f"ratio now/baseline: {now / base:.2f}")
    for side, runs in attempts.items():
        fields = set().union(*(differing_fields(runs[0], r) for r in runs[1:]))
        print(f"{side:>24}: fields that differ between its runs: {sorted(fields) or 'none'}")
    between = set().union(
        *(differing_fields(a, b) for a in attempts["now"] for b in list(attempts.values())[1])
    )
    print(f"{'between the sides':>24}: {sorted(between) or 'none'}")


if __name__ == "__main__":
    main()
