"""The LM head over chosen positions only, a chunk at a time: no [T, vocab] tensor, forward or backward.

Qwen3's vocabulary is 151,936: the logits of 16K positions are ~5 GB in bf16 and ~10 GB in fp32,
and a plain training step holds them several times (upcast, log-softmax, their gradients). Here
the hidden states that predict a wanted token are picked by index and pushed through the head
`chunk` rows at a time, with one [chunk, vocab] fp32 buffer worked in place.

- `token_logprobs`: log p(target) per position, no gradient: the scorer, and any frozen reference
  pass (DMPO's: the reference model's trunk over the batch, then this over the same rows).
- `nll`: the summed negative log-likelihood over a divisor, with its gradient (training). The
  gradient of each chunk is computed in the forward pass, while its logits exist (softmax - onehot,
  then two matmuls), and kept as [positions, d] and [vocab, d] tensors: the backward pass only
  scales them. No logits are recomputed, and the head weight is needed in the forward pass only
  (under DeepSpeed ZeRO-3, `register_weight` has the model's forward gather it).

Numerics follow the plain path: the head matmul runs in the dtype autocast or the weights give,
the log-softmax in fp32, the gradient is scaled before its cast to the matmul dtype. What differs
is summation order: fp32 round-off, and under bf16 the weight gradient is a sum of per-chunk bf16
products (taken in fp32) instead of one bf16 product.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def register_weight(module: torch.nn.Module, weight: torch.Tensor) -> None:
    """Under DeepSpeed ZeRO-3, have `module`'s forward and backward gather `weight` (a no-op otherwise).

    ZeRO-3 gathers a parameter only for the forward of the module that owns it; the chunked loss
    reads the LM-head weight from the forward of the model around it. Registered as an external
    parameter of that model, it is gathered with the model's own parameters, on every rank alike.
    """
    if hasattr(weight, "ds_id"):
        import deepspeed

        deepspeed.zero.register_external_parameter(module, weight)


def causal_mask(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """The attention mask a causal trunk needs for a batch: None when every row is right-padded (its ones,
    then its zeros), since no real position attends to a later one and the padding changes nothing of
    the real positions' states; SDPA then takes its causal fast path (about 1.6x faster on the CPU for
    the DMPO pairs' mixed lengths, the same bits for every real position). Any other mask is kept."""
    if attention_mask is None:
        return None
    ones = attention_mask.sum(dim=1, keepdim=True)
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    return None if torch.equal(attention_mask != 0, positions < ones) else attention_mask


def supervised_index(labels: torch.Tensor, ignore_index: int = -100) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, targets): the flat positions b*T + t whose hidden state predicts labels[b, t+1], and those labels.

    The causal shift of the plain loss: position t predicts token t+1; labels[:, 0] is never a target.
    """
    b, t = labels.shape
    nxt = labels[:, 1:]
    keep = nxt != ignore_index
    rows = (torch.arange(b, device=labels.device)[:, None] * t + torch.arange(t - 1, device=labels.device))[
        keep
    ]
    return rows, nxt[keep]


def _exp_shifted_(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(z, total, shift): z = exp(logits - shift) in fp32 (in place when logits are fp32), total = z.sum(1).

    log-sum-exp = log(total) + shift.
    """
    z = logits.float()
    shift = z.amax(dim=1, keepdim=True)
    total = z.sub_(shift).exp_().sum(dim=1)
    return z, total, shift.squeeze(1)


def chunk_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log_softmax(logits)[i, targets[i]] as float64, with one [chunk, vocab] fp32 buffer worked in place."""
    picked = logits.gather(1, targets.unsqueeze(1)).squeeze(1).double()
    z, total, shift = _exp_shifted_(logits)
    del logits, z  # the model-dtype logits and the buffer go before the next chunk
    return picked - (total.log_().double() + shift.double())


@torch.no_grad()
def token_logprobs(
    weight: torch.Tensor, hidden: torch.Tensor, rows: torch.Tensor, targets: torch.Tensor, chunk: int
) -> torch.Tensor:
    """log p(targets[i] | hidden[rows[i]]) under the head `weight` [vocab, d], float64, `chunk` rows at a time.

    hidden is [positions, d] (a flat view of [B, T, d]); rows index into it.
    """
    out = torch.empty(len(rows), dtype=torch.float64, device=hidden.device)
    for s in range(0, len(rows), chunk):
        h = hidden[rows[s : s + chunk]]
        out[s : s + len(h)] = chunk_logprobs(F.linear(h, weight), targets[s : s + chunk])
    return out


def _matmul_dtype(weight: torch.Tensor) -> torch.dtype:
    """The dtype the plain lm_head's matmul runs in: autocast's when it is on, else the weight's."""
    device = weight.device.type
    if torch.is_autocast_enabled(device) and weight.dtype in (torch.float32, torch.float16, torch.bfloat16):
        return torch.get_autocast_dtype(device)
    return weight.dtype


def _dlogits_(z: torch.Tensor, total: torch.Tensor, targets: torch.Tensor, inv: torch.Tensor) -> torch.Tensor:
    """d(-log p_target / denom)/d logits = (softmax - onehot) / denom, in place of z = exp(logits - shift)."""
    z.div_(total.unsqueeze(1))
    z[torch.arange(len(targets), device=targets.device), targets] -= 1.0
    # scaled before any cast to the matmul dtype, as the plain loss's backward does (same rounding)
    return z.mul_(inv)


class _ChunkedNLL(torch.autograd.Function):
    """sum_i -log softmax(hidden[rows[i]] @ W.T)[targets[i]] / denom; its gradient is made chunk by chunk in forward."""

    @staticmethod
    def forward(ctx, hidden, weight, rows, targets, chunk, denom):
        want_h, want_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        dt = _matmul_dtype(weight)
        w = weight.to(dt)  # cast once, not per chunk
        grad_h = torch.zeros_like(hidden) if want_h else None
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if want_w else None
        total = torch.zeros((), dtype=torch.float64, device=hidden.device)
        inv = 1.0 / torch.as_tensor(denom, dtype=torch.float32, device=hidden.device)
        for s in range(0, len(rows), chunk):
            idx, y = rows[s : s + chunk], targets[s : s + chunk]
            h = hidden[idx].to(dt)
            logits = F.linear(h, w)
            picked = logits.gather(1, y.unsqueeze(1)).squeeze(1).float()
            z, tot, shift = _exp_shifted_(logits)
            del logits  # from here on the fp32 buffer is the only [chunk, vocab] tensor
            total += (tot.log() + shift - picked).double().sum()
            if not (want_h or want_w):
                continue
            g = _dlogits_(z, tot, y, inv).to(dt)
            del z
            if want_h:
                grad_h[idx] = (g @ w).to(grad_h.dtype)
            if want_w and dt == torch.float32:
                grad_w.addmm_(g.t(), h)
            elif want_w:
                grad_w += g.t() @ h  # a low-precision partial per chunk, summed in fp32
        ctx.save_for_backward(grad_h, grad_w)
        ctx.weight_dtype = weight.dtype
        return total.float() / torch.as_tensor(denom, dtype=torch.float32, device=hidden.device)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        grad_h, grad_w = ctx.saved_tensors
        # in place: no second [vocab, d] buffer (the graph is not kept for a second backward)
        gh = grad_h.mul_(grad_out.to(grad_h.dtype)) if grad_h is not None else None
        gw = grad_w.mul_(grad_out).to(ctx.weight_dtype) if grad_w is not None else None
        return gh, gw, None, None, None, None


def nll(
    weight: torch.Tensor,
    hidden: torch.Tensor,
    rows: torch.Tensor,
    targets: torch.Tensor,
    chunk: int,
    denom: torch.Tensor | float = 1.0,
) -> torch.Tensor:
    """Summed negative log-likelihood of targets divided by denom (fp32 scalar), differentiable in hidden and weight.

    hidden is [positions, d] (a flat view of [B, T, d]); rows index into it. denom is the plain
    loss's divisor (the number of supervised tokens the Trainer counted). Called with no rows it
    still returns a zero that is part of the graph (every rank of a data-parallel step must
    produce gradients for the same parameters).
    """
    if chunk < 1:
        raise ValueError(f"chunk must be a positive number of rows, got {chunk}")
    return _ChunkedNLL.apply(hidden, weight, rows, targets, chunk, denom)
