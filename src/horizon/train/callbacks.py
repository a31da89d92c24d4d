"""Trainer callbacks: progress lines and train_log.jsonl, and the time segments behind wall_hours.

A training run may be killed and resumed several times; each process's segment (start, last seen,
tokens, step) is kept in checkpoints/segments.json so that timing.json counts all of them.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from horizon.io import write_json
from horizon.train.examples import TrainSpec

log = logging.getLogger("horizon.train")


def progress_callback(spec: TrainSpec, log_path: Path):
    from transformers import TrainerCallback

    class ProgressAndLog(TrainerCallback):
        """One progress line every ~10 s, and train_log.jsonl: per step the loss and the lr it used."""

        def __init__(self):
            self.last = 0.0
            self.lr_used: dict[int, float] = {}
            self.t0 = time.monotonic()
            self.tokens0 = None

        def on_step_begin(self, args, state, control, optimizer=None, **kw):
            if optimizer is not None:
                self.lr_used[state.global_step + 1] = optimizer.param_groups[0]["lr"]

        def on_log(self, args, state, control, logs=None, **kw):
            if not state.is_world_process_zero or not logs or "loss" not in logs:
                return
            rec = {
                "step": state.global_step,
                "epoch": round(state.epoch or 0, 6),
                "loss": logs["loss"],
                "lr": self.lr_used.get(state.global_step, logs.get("learning_rate")),
                "grad_norm": logs.get("grad_norm"),
                "tokens_seen": state.num_input_tokens_seen,
                **{k: logs[k] for k in getattr(spec, "log_keys", ()) if k in logs},  # e.g. DMPO's rewards
            }
            with open(log_path, "a") as fh:
                fh.write(json.dumps(rec) + "\n")
            now = time.monotonic()
            if self.tokens0 is None:
                self.tokens0 = state.num_input_tokens_seen
            if now - self.last >= 10 or state.global_step == state.max_steps:
                self.last = now
                el = now - self.t0
                rate = (state.num_input_tokens_seen - self.tokens0) / max(el, 1e-9)
                left = (
                    (state.max_steps - state.global_step) * el / max(state.global_step - self._start_step, 1)
                )
                log.info(
                    "train %s: step %d/%d (%.0f%%), loss %.4f, lr %.3g, %s tok/s, eta %.0fs",
                    spec.name,
                    state.global_step,
                    state.max_steps,
                    100 * state.global_step / max(state.max_steps, 1),
                    rec["loss"],
                    rec["lr"] or 0.0,
                    f"{rate:,.0f}",
                    left,
                )

        def on_train_begin(self, args, state, control, **kw):
            self._start_step = state.global_step
            self.t0 = time.monotonic()

    return ProgressAndLog()


def _segments(spec: TrainSpec) -> Path:
    return Path(spec.checkpoints) / "segments.json"


def _record_segment(spec: TrainSpec, seg_id: str, start: float, end: float, tokens: int, steps: int) -> None:
    p = _segments(spec)
    segs = json.loads(p.read_text()) if p.exists() else {}
    segs[seg_id] = {"start": start, "end": end, "tokens_seen": tokens, "global_step": steps}
    write_json(p, segs)


def segments_path(spec: TrainSpec) -> Path:
    return Path(spec.checkpoints) / "segments.json"


def record_segment(spec: TrainSpec, seg_id: str, start: float, end: float, tokens: int, steps: int) -> None:
    p = segments_path(spec)
    segs = json.loads(p.read_text()) if p.exists() else {}
    segs[seg_id] = {"start": start, "end": end, "tokens_seen": tokens, "global_step": steps}
    write_json(p, segs)


def segment_callback(spec: TrainSpec, start: float):
    """Keep this process's time on record (every 30 s and at saves), so a killed run still counts."""
    from transformers import TrainerCallback

    seg_id = f"{start:.3f}"

    class Segment(TrainerCallback):
        last = 0.0

        def _record(self, state):
            if state.is_world_process_zero:
                self.last = time.monotonic()
                record_segment(
                    spec, seg_id, start, time.time(), state.num_input_tokens_seen, state.global_step
                )

        def on_train_begin(self, a, state, control, **kw):
            self._record(state)

        def on_step_end(self, a, state, control, **kw):
            if time.monotonic() - self.last > 30:
                self._record(state)

        def on_save(self, a, state, control, **kw):
            self._record(state)

    return Segment()
