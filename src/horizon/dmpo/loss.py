"""The DMPO loss, on per-turn summed log-probs of the assistant tokens, and the chunked path they come from.

For a pair (w = the verified success, l = a failure of the same task):

    L = -log sigmoid( beta * sum_{t=1..T_w} alpha_t(T_w) * [log pi_theta(a_t^w | s_t^w) - log pi_ref(a_t^w | s_t^w)]
                    - beta * sum_{t=1..T_l} alpha_t(T_l) * [log pi_theta(a_t^l | s_t^l) - log pi_ref(a_t^l | s_t^l)] )

    alpha_t(T) = gamma^(t-1) * (1 - gamma^(T-t+1)) / (1 - gamma^T)

a_t is the t-th assistant turn (its content tokens and <|im_end|>, as SFT supervises them), s_t
everything before it, log pi(a_t | s_t) the sum of its tokens' log-probs. **T is the number of
assistant turns of that trajectory** (T_w for the success, T_l for the failure): the formula leaves
open whether T is per trajectory or shared by the pair; per trajectory keeps each trajectory's
weights a function of that trajectory alone. gamma = 0 and gamma = 1 are the formula's limits:
alpha = (1, 0, ..., 0) and alpha_t = (T - t + 1) / T.

Memory: the policy's per-token log-probs never need a [T, vocab] tensor. The trunk runs once; the
LM head runs over the target positions only, `chunk` rows at a time, twice: a pass without
gradient gives the per-token log-probs and log-sum-exps, hence the per-turn sums, the loss and its
derivative c_i with respect to every target's log-prob; a second pass makes the gradient of
sum_i c_i log p_i chunk by chunk while the chunk's logits exist (so the head weight is needed in
the forward pass only, as ZeRO-3 gathers it). The value returned is the loss; its gradient is the
loss's exact gradient.
`turn_objective` is the one entry point (the shared chunked LM-head path can replace its two passes).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F


def turn_weights(n_turns: int, gamma: float) -> np.ndarray:
    """alpha_1..alpha_T for a trajectory of T = n_turns assistant turns (float64)."""
    if n_turns < 1:
        raise ValueError(f"a trajectory needs at least one assistant turn, got {n_turns}")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    t = np.arange(1, n_turns + 1, dtype=np.float64)
    if gamma == 1.0:  # the limit gamma -> 1
        return (n_turns - t + 1) / n_turns
    if gamma == 0.0:  # the limit gamma -> 0 (0^0 = 1)
        return (t == 1).astype(np.float64)
    lg = math.log(gamma)
    # 1 - gamma^n = -expm1(n log gamma): exact also for gamma close to 1
    return np.exp((t - 1) * lg) * np.expm1((n_turns - t + 1) * lg) / math.expm1(n_turns * lg)


def dmpo_loss(
    policy: torch.Tensor, reference: torch.Tensor, alpha: torch.Tensor, beta: float
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Mean DMPO loss of B pairs from per-turn log-probs [2B, T_max]: rows 0..B-1 chosen, B..2B-1 rejected.

    alpha is 0 beyond each trajectory's last turn (padding). Metrics: the implicit rewards
    beta * sum_t alpha_t log(pi_theta / pi_ref) of the chosen and rejected trajectories, their
    margin, and the accuracy (margin > 0), each a mean over the pairs.
    """
    n = policy.shape[0] // 2
    reward = beta * (alpha * (policy - reference)).sum(dim=1)
    chosen, rejected = reward[:n], reward[n:]
    margin = chosen - rejected
    loss = -F.logsigmoid(margin).mean()
    metrics = {
        "reward_chosen": chosen.mean(),
        "reward_rejected": rejected.mean(),
        "reward_margin": margin.mean(),
        "reward_accuracy": (margin > 0).double().mean(),
    }
    return loss, {k: v.detach() for k, v in metrics.items()}


def target_rows(input_ids: torch.Tensor, turn_ids: torch.Tensor, t_max: int):
    """(rows, targets, segments) of the assistant tokens of a [N, L] batch.

    turn_ids[b, p] is the assistant turn (0-based) token p belongs to, -1 elsewhere. Token p is
    predicted by the hidden state at p - 1: rows = b * L + p - 1 in the flat [N * L, d] hidden
    states, targets = input_ids[b, p], segments = b * t_max + turn (the per-turn sums' index).
    """
    if (turn_ids[:, 0] >= 0).any():
        raise ValueError("position 0 has no context and cannot be an assistant token")
    b, p = torch.nonzero(turn_ids >= 0, as_tuple=True)
    length = input_ids.shape[1]
    return b * length + p - 1, input_ids[b, p], b * t_max + turn_ids[b, p].long()


def _matmul_dtype(weight: torch.Tensor) -> torch.dtype:
    """The dtype the model's own lm_head matmul would run in: autocast's when it is on, else the weight's."""
    device = weight.device.type
    if torch.is_autocast_enabled(device) and weight.dtype in (torch.float32, torch.float16, torch.bfloat16):
        return torch.get_autocast_dtype(device)
    return weight.dtype


def _logprobs_and_lse(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(log p of the targets, log-sum-exp of each row), fp32 arithmetic in one [chunk, vocab] buffer in place."""
    z = logits.float()
    picked = z.gather(1, targets.unsqueeze(1)).squeeze(1)
    shift = z.amax(dim=1, keepdim=True)
    lse = z.sub_(shift).exp_().sum(dim=1).log_() + shift.squeeze(1)
    return picked - lse, lse


def _chunk_pass(weight, hidden, rows, targets, chunk, fn) -> None:
    """fn(start, rows, targets, hidden rows, weight, logits) for each `chunk` of rows, in the matmul dtype."""
    w = weight.to(_matmul_dtype(weight))  # cast once, not per chunk
    for s in range(0, len(rows), chunk):
        h = hidden[rows[s : s + chunk]].to(w.dtype)
        fn(s, rows[s : s + chunk], targets[s : s + chunk], h, w, F.linear(h, w))


@torch.no_grad()
def logprobs_and_lse(weight, hidden, rows, targets, chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """log p(targets[i] | hidden[rows[i]]) under the head `weight` [vocab, d] (float64), and each row's
    log-sum-exp (fp32), `chunk` rows at a time."""
    logp = torch.empty(len(rows), dtype=torch.float64, device=hidden.device)
    lse = torch.empty(len(rows), dtype=torch.float32, device=hidden.device)

    def one(s, idx, y, h, w, logits):
        lp, ls = _logprobs_and_lse(logits, y)
        logp[s : s + len(y)], lse[s : s + len(y)] = lp.double(), ls

    _chunk_pass(weight, hidden, rows, targets, chunk, one)
    return logp, lse


def token_logprobs(weight, hidden, rows, targets, chunk: int) -> torch.Tensor:
    """log p(targets[i] | hidden[rows[i]]) under the head `weight` [vocab, d], float64, `chunk` rows at a time."""
    return logprobs_and_lse(weight, hidden, rows, targets, chunk)[0]


class _WeightedLogprobGrad(torch.autograd.Function):
    """A zero whose gradient is that of sum_i coef[i] * log p(targets[i] | hidden[rows[i]]), made chunk by
    chunk in forward from the rows' log-sum-exp (the sum's value is the caller's: it has the log-probs)."""

    @staticmethod
    def forward(ctx, hidden, weight, rows, targets, coef, lse, chunk):
        want_h, want_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_h = torch.zeros_like(hidden) if want_h else None
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if want_w else None

        def one(s, idx, y, h, w, logits):
            # d(c log p_y)/d logits = c * (onehot(y) - softmax), in one fp32 buffer worked in place
            c = coef[s : s + len(y)].float()
            g = logits.float().sub_(lse[s : s + len(y)].unsqueeze(1)).exp_().mul_(-c.unsqueeze(1))
            g[torch.arange(len(y), device=y.device), y] += c
            g = g.to(w.dtype)
            if want_h:
                grad_h.index_add_(0, idx, (g @ w).to(grad_h.dtype))
            if want_w:
                grad_w.add_((g.t() @ h).float())

        if want_h or want_w:
            _chunk_pass(weight, hidden.detach(), rows, targets, chunk, one)
        ctx.save_for_backward(grad_h, grad_w)
        ctx.weight_dtype = weight.dtype
        return torch.zeros((), dtype=torch.float32, device=hidden.device)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        grad_h, grad_w = ctx.saved_tensors
        gh = grad_h * grad_out.to(grad_h.dtype) if grad_h is not None else None
        gw = (grad_w * grad_out).to(ctx.weight_dtype) if grad_w is not None else None
        return gh, gw, None, None, None, None, None


Objective = Callable[[torch.Tensor], tuple[torch.Tensor, dict]]


def turn_objective(
    weight: torch.Tensor,
    hidden: torch.Tensor,
    rows: torch.Tensor,
    targets: torch.Tensor,
    segments: torch.Tensor,
    n_segments: int,
    chunk: int,
    objective: Objective,
) -> tuple[torch.Tensor, dict]:
    """objective(per-segment summed log-probs [n_segments], float64) -> (scalar, metrics), with its exact
    gradient through `hidden` [positions, d] and the head `weight`, never holding more than one
    [chunk, vocab] buffer. Returns the objective's value (fp32) carrying that gradient, and its metrics.
    """
    if chunk < 1:
        raise ValueError(f"chunk must be a positive number of rows, got {chunk}")
    lp, lse = logprobs_and_lse(weight, hidden.detach(), rows, targets, chunk)
    per_segment = torch.zeros(n_segments, dtype=torch.float64, device=hidden.device)
    leaf = per_segment.index_add_(0, segments, lp).requires_grad_(True)
    with torch.enable_grad():
        value, metrics = objective(leaf)
        (d_segment,) = torch.autograd.grad(value, leaf)
    # d value = sum_i d_segment[segment of i] * d log p_i: carried by a zero added to the value
    carrier = _WeightedLogprobGrad.apply(hidden, weight, rows, targets, d_segment[segments], lse, chunk)
    return value.detach().float() + carrier, metrics
