"""The DMPO worker: `torchrun -m horizon.dmpo.worker SPEC.json`, one process per rank.

horizon.train.worker.run_worker does the rest (resume from the last complete checkpoint, the
final directory with timing.json, train_log.jsonl, training_args.json); this module gives it the
trainer: the policy's weights, the pair examples, and a forward that computes the DMPO loss.

The loss is computed inside the model's forward (installed on the instance, as the SFT loss
path does), so the HF Trainer, DDP and the DeepSpeed engine call the model as a module: ZeRO-3
gathers the trunk's weights through its hooks and the LM-head weight as an external parameter of
the model. A batch of B pairs is one forward over 2B sequences (chosen first). The reference
log-probs and turn weights travel as numpy arrays, so that no input cast (DeepSpeed casts float
tensors to bf16) touches them; they are used in float64.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import torch

from horizon.dmpo.launch import DMPOSpec
from horizon.dmpo.loss import dmpo_loss, target_rows, turn_objective, turn_weights
from horizon.lmhead import causal_mask

log = logging.getLogger("horizon.dmpo.worker")


class PairExamples:
    """Map-style dataset over the memory-mapped pair examples (a torch Dataset by duck typing)."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        self._table = None
        self._n = pa.ipc.open_file(pa.memory_map(self.path)).read_all().num_rows

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> dict:
        if self._table is None:  # opened lazily: once per dataloader worker process
            self._table = pa.ipc.open_file(pa.memory_map(self.path)).read_all()
        return {
            name: self._table.column(name)[i].values.to_numpy(zero_copy_only=False)
            for name in self._table.column_names
            if name != "pair_id"
        }

    def __getstate__(self):
        return {"path": self.path, "_table": None, "_n": self._n}


def collate_pairs(examples: list[dict], pad_id: int, gamma: float) -> dict:
    """2B right-padded sequences (chosen, then rejected), the turn of each assistant token, and per turn
    the reference log-probs and weights alpha_t(T) with T = that sequence's number of turns."""
    seqs = [
        (e[f"{side}_input_ids"], e[f"{side}_turn_ids"], e[f"{side}_reference"])
        for side in ("chosen", "rejected")
        for e in examples
    ]
    n, t_max = max(len(s[0]) for s in seqs), max(len(s[2]) for s in seqs)
    ids = torch.full((len(seqs), n), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), n), dtype=torch.long)
    turn_ids = torch.full((len(seqs), n), -1, dtype=torch.long)
    reference = np.zeros((len(seqs), t_max))
    alpha = np.zeros((len(seqs), t_max))
    for b, (x, turns, ref) in enumerate(seqs):
        ids[b, : len(x)] = torch.from_numpy(np.asarray(x, dtype=np.int64))
        mask[b, : len(x)] = 1
        turn_ids[b, : len(x)] = torch.from_numpy(np.asarray(turns, dtype=np.int64))
        reference[b, : len(ref)] = ref
        alpha[b, : len(ref)] = turn_weights(len(ref), gamma)
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "turn_ids": turn_ids,
        "reference": reference,
        "alpha": alpha,
    }


class PairCollator:
    def __init__(self, pad_id: int, gamma: float):
        self.pad_id, self.gamma = pad_id, gamma

    def __call__(self, examples: list[dict]) -> dict:
        return collate_pairs(examples, self.pad_id, self.gamma)


def install_dmpo_forward(model, beta: float, chunk: int) -> None:
    """model(input_ids, attention_mask, turn_ids, reference, alpha) -> {"loss", "metrics"}; other calls
    (generation) go to the model's own forward."""
    head, trunk = model.get_output_embeddings(), model.get_decoder()
    if not isinstance(head, torch.nn.Linear) or head.bias is not None:
        raise ValueError(f"DMPO's chunked LM head expects a bias-free linear head, not {type(head).__name__}")
    if hasattr(head.weight, "ds_id"):  # ZeRO-3: gather the head weight with the model's own parameters
        import deepspeed

        deepspeed.zero.register_external_parameter(model, head.weight)
    own_forward = model.forward

    def forward(input_ids=None, attention_mask=None, turn_ids=None, reference=None, alpha=None, **kwargs):
        if turn_ids is None:
            return own_forward(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        hidden = trunk(input_ids=input_ids, attention_mask=causal_mask(attention_mask)).last_hidden_state
        device = hidden.device
        ref = torch.as_tensor(np.asarray(reference), dtype=torch.float64, device=device)
        weights = torch.as_tensor(np.asarray(alpha), dtype=torch.float64, device=device)
        rows, targets, segments = target_rows(input_ids, turn_ids.to(input_ids.device), ref.shape[1])

        def objective(per_turn):
            return dmpo_loss(per_turn.view(ref.shape), ref, weights, beta)

        loss, metrics = turn_objective(
            head.weight,
            hidden.reshape(-1, hidden.shape[-1]),
            rows.to(device),
            targets.to(device),
            segments.to(device),
            ref.numel(),
            chunk,
            objective,
        )
        return {"loss": loss, "metrics": metrics}

    model.forward = forward


def dmpo_trainer_class():
    from transformers import Trainer

    class DMPOTrainer(Trainer):
        """The HF Trainer with the DMPO forward's loss, and its rewards averaged over the logging interval
        and the ranks into the logs (hence train_log.jsonl)."""

        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.loss_is_scaled_for_ga = False  # a mean over this batch's pairs: the Trainer divides by GA
            self._sums: dict[str, float] = {}
            self._count = 0

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            out = model(**inputs)
            for k, v in out["metrics"].items():
                self._sums[k] = self._sums.get(k, 0.0) + float(v)
            self._count += 1
            return (out["loss"], out) if return_outputs else out["loss"]

        def log(self, logs, start_time=None):
            if "loss" in logs and self._count:
                keys = sorted(self._sums)
                local = torch.tensor([self._sums[k] / self._count for k in keys], device=self.args.device)
                logs.update(zip(keys, self.accelerator.reduce(local, reduction="mean").tolist()))
                self._sums, self._count = {}, 0
            super().log(logs, start_time)

    return DMPOTrainer


def make_dmpo_trainer(spec: DMPOSpec, callbacks: list | None = None):
    """(trainer, tokenizer): the SFT worker's set-up (arguments, DeepSpeed, dtype) with DMPO's model and data."""
    from transformers.trainer_callback import PrinterCallback

    from horizon.train.worker import load_for_training

    args, tokenizer, model = load_for_training(spec)
    install_dmpo_forward(model, spec.beta, spec.chunk)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    trainer = dmpo_trainer_class()(
        model=model,
        args=args,
        train_dataset=PairExamples(spec.examples_path),
        data_collator=PairCollator(pad, spec.gamma),
        callbacks=callbacks or [],
    )
    trainer.remove_callback(PrinterCallback)
    return trainer, tokenizer


if __name__ == "__main__":  # torchrun -m horizon.dmpo.worker SPEC.json
    import sys

    from horizon.io import die_with_parent, setup_logging
    from horizon.train.worker import exit_done, run_worker

    die_with_parent()
    setup_logging(os.environ.get("HORIZON_LOG"))
    run_worker(sys.argv[1], load=DMPOSpec.load, make=make_dmpo_trainer)
    exit_done()
