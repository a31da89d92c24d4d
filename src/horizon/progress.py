"""Progress lines for long stages: readable in a terminal, a Snakemake log and a Slurm log alike.

A tqdm bar is unreadable in a log file (carriage returns); this prints one line every `every`
seconds (and at the end) with counts, rate and time left.
"""

from __future__ import annotations

import logging
import time


class Progress:
    def __init__(
        self,
        desc: str,
        total: int | None,
        unit: str = "items",
        every: float = 10.0,
        logger: logging.Logger | None = None,
    ):
        self.desc, self.total, self.unit, self.every = desc, total, unit, every
        self.log = logger or logging.getLogger("horizon.progress")
        self.start = self.last = time.monotonic()
        self.done = 0
        self.extra: dict[str, float] = {}

    def update(self, n: int = 1, **extra: float) -> None:
        self.done += n
        for k, v in extra.items():
            self.extra[k] = self.extra.get(k, 0) + v
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            self._emit(now)

    def close(self) -> None:
        self._emit(time.monotonic(), final=True)

    def _emit(self, now: float, final: bool = False) -> None:
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        parts = [f"{self.desc}: {self.done}"]
        if self.total:
            parts[0] += f"/{self.total} {self.unit} ({100 * self.done / self.total:.0f}%)"
        else:
            parts[0] += f" {self.unit}"
        parts.append(f"{rate:.1f} {self.unit}/s")
        for k, v in self.extra.items():
            parts.append(f"{v / elapsed:,.0f} {k}/s")
        if self.total and not final and rate > 0:
            parts.append(f"eta {_fmt((self.total - self.done) / rate)}")
        parts.append(f"elapsed {_fmt(elapsed)}" + (" (done)" if final else ""))
        self.log.info(", ".join(parts))


def _fmt(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
