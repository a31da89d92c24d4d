"""The training loss (`train.loss`): the LM head and cross-entropy over supervised positions only.

- `chunked` (default): horizon.lmhead.nll, pure torch, any device; never a [T, vocab] tensor.
- `plain`: the model's own forward and loss (logits of every position, upcast to fp32).
- `liger`, `cce`: Liger Kernel's fused linear cross-entropy, Apple's cut cross-entropy (Triton, CUDA
  only; optional extras `horizon[liger]`, `horizon[cce]`).

The loss is plugged in by replacing the model's `forward` on the instance (`use_loss`): the HF
Trainer, DDP and the DeepSpeed engine still call the model as a module, so the trunk's ZeRO-3
hooks, gradient checkpointing, accelerate's autocast wrapper, `num_items_in_batch` (token
averaging across devices and accumulation steps) and checkpoint resume are those of the plain
path. The class, its weights and what save_pretrained writes are untouched. A call without
labels (generation, evaluation) goes to the model's own forward.
"""

from __future__ import annotations

import torch

from horizon.lmhead import causal_mask, nll, register_weight, supervised_index

LOSSES = ("chunked", "plain", "liger", "cce")
_PACKAGES = {"liger": ("liger_kernel", "liger-kernel"), "cce": ("cut_cross_entropy", "cut-cross-entropy")}


def _liger(weight, hidden, rows, targets, chunk, denom):
    from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss

    return LigerFusedLinearCrossEntropyLoss(reduction="sum")(weight, hidden[rows], targets) / denom


def _cce(weight, hidden, rows, targets, chunk, denom):
    from cut_cross_entropy import linear_cross_entropy

    return linear_cross_entropy(hidden[rows], weight, targets, reduction="sum") / denom


_FUNCTIONS = {"chunked": nll, "liger": _liger, "cce": _cce}


def _check_kernel(kind: str, head) -> None:
    """A clear error, at start-up, when a fused GPU kernel cannot run here."""
    module, package = _PACKAGES[kind]
    if not torch.cuda.is_available():
        raise RuntimeError(
            f"train.loss: {kind} runs Triton kernels on CUDA GPUs only and this machine has none; "
            "use train.loss: chunked (the same loss in pure torch)"
        )
    try:
        __import__(module)
    except ImportError as e:
        raise RuntimeError(
            f"train.loss: {kind} needs the {package} package ({e}); install it with pip install "
            f"'horizon[{kind}]' or use train.loss: chunked"
        ) from e


def _check_head(model) -> None:
    head = model.get_output_embeddings()
    if not isinstance(head, torch.nn.Linear) or head.bias is not None:
        raise ValueError(
            f"train.loss: chunked expects a bias-free linear LM head, {type(model).__name__} has "
            f"{type(head).__name__}; use train.loss: plain"
        )
    for key in ("final_logit_softcapping", "logit_scale"):
        if getattr(model.config, key, None) not in (None, 1.0):
            raise ValueError(f"train.loss: chunked does not apply {key}; use train.loss: plain")


def use_loss(model, kind: str, chunk: int) -> None:
    """Make `model(input_ids, attention_mask, labels, num_items_in_batch=...)` compute its loss with `kind`."""
    if kind not in LOSSES:
        raise ValueError(f"train.loss: {kind!r} is not one of {', '.join(LOSSES)}")
    if kind == "plain":
        return
    _check_head(model)
    trunk, head = model.get_decoder(), model.get_output_embeddings()
    if kind != "chunked":
        _check_kernel(kind, head)
    loss_of = _FUNCTIONS[kind]
    register_weight(model, head.weight)  # ZeRO-3: gathered for this model's forward and backward
    own_forward = model.forward

    def forward(input_ids=None, attention_mask=None, labels=None, num_items_in_batch=None, **kwargs):
        if labels is None:
            return own_forward(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        from transformers.modeling_outputs import CausalLMOutputWithPast

        out = trunk(input_ids=input_ids, attention_mask=causal_mask(attention_mask), **kwargs)
        hidden = out.last_hidden_state
        rows, targets = supervised_index(labels.to(hidden.device))
        # the plain loss's reduction: a sum over the items of the whole (accumulated, all-rank)
        # batch when the Trainer counts them, else the mean over this batch's supervised tokens
        denom = num_items_in_batch if num_items_in_batch is not None else len(targets)
        if torch.is_tensor(denom):
            denom = denom.to(hidden.device)
        loss = loss_of(head.weight, hidden.reshape(-1, hidden.shape[-1]), rows, targets, chunk, denom)
        return CausalLMOutputWithPast(loss=loss, hidden_states=out.hidden_states)

    model.forward = forward
