#!/usr/bin/env python
"""The last guard of a local sandbox's stop, in CPU milliseconds: SIGKILL to every process of its leased
uid, by `kill -1` run as that uid (now) against `pkill -u UID` (before), in the same run.

  sudo python bench/sandbox_stop.py [--calls 200] [--background 0 500]

pkill reads the status file of every process on the machine; kill -1 is one system call. A demo stops
about 600 sandboxes beside 140 processes on average and up to 500 (a rollout job's 24 sandboxes each
hold pid 1, tmux and a shell; sampled every 2 s over a `make demo`), so each way is timed beside
--background idle processes (`sleep`, of another uid). CPU is the whole machine's (/proc/stat), over --calls stops; needs root
(the uid is one no process has, as a leased sandbox uid is once its sandbox is gone).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from horizon.eval.sandbox.local.sandbox import kill_uid  # noqa: E402

UID = 64999  # nobody's


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent not idle (user, nice, system, irq, softirq)."""
    f = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(x) for x in f[:8]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def pkill(uid: int) -> None:
    subprocess.run(["pkill", "-KILL", "-u", str(uid)], capture_output=True)


def per_call_ms(way, calls: int) -> float:
    start = busy_seconds()
    for _ in range(calls):
        way(UID)
    return (busy_seconds() - start) / calls * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--background", type=int, nargs="+", default=[0, 500])
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root: a sandbox has a uid of its own only when started as root")
    print(f"{'processes beside':>16}  {'pkill -u (before)':>18}  {'kill -1 as uid (now)':>20}  ratio")
    for n in args.background:
        sleepers = [subprocess.Popen(["sleep", "600"]) for _ in range(n)]
        try:
            total = sum(1 for e in os.listdir("/proc") if e.isdigit())
            before = per_call_ms(pkill, args.calls)
            now = per_call_ms(kill_uid, args.calls)
        finally:
            for p in sleepers:
                p.kill()
                p.wait()
        print(
            f"{n:>16}  {before:>15.2f} ms  {now:>17.2f} ms  x{now / before:.2f}   (processes on the machine: {total})"
        )


if __name__ == "__main__":
    main()
