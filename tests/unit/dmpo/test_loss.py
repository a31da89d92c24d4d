"""The DMPO loss: the formula by hand, its gamma limits, and the chunked path's value and gradient."""

import math

import numpy as np
import pytest
import torch

from horizon.dmpo.loss import dmpo_loss, target_rows, turn_objective, turn_weights
from horizon.dmpo.worker import collate_pairs, install_dmpo_forward


def test_turn_weights_by_hand():
    g = 0.7
    assert turn_weights(2, g) == pytest.approx([1.0, g * (1 - g) / (1 - g**2)], abs=1e-15)
    assert turn_weights(3, g) == pytest.approx(
        [1.0, g * (1 - g**2) / (1 - g**3), g**2 * (1 - g) / (1 - g**3)], abs=1e-15
    )
    assert turn_weights(1, g) == pytest.approx([1.0])
    with pytest.raises(ValueError, match="at least one assistant turn"):
        turn_weights(0, g)
    with pytest.raises(ValueError, match="gamma"):
        turn_weights(2, 1.5)


@pytest.mark.parametrize("n", [1, 2, 5, 40])
def test_gamma_limits_are_the_formulas_limits(n):
    first_only = np.eye(1, n)[0]
    linear = (n - np.arange(1, n + 1) + 1) / n
    assert turn_weights(n, 0.0) == pytest.approx(first_only)
    assert turn_weights(n, 1e-9) == pytest.approx(first_only, abs=1e-8)  # gamma -> 0
    assert turn_weights(n, 1.0) == pytest.approx(linear)
    assert turn_weights(n, 1 - 1e-9) == pytest.approx(linear, rel=1e-6)  # gamma -> 1, no 0/0 round-off
    assert np.all(np.isfinite(turn_weights(n, 0.999999)))


def _loss(policy, reference, alpha, beta):
    loss, metrics = dmpo_loss(
        *(torch.tensor(np.asarray(x), dtype=torch.float64) for x in (policy, reference, alpha)), beta
    )
    return loss.item(), {k: v.item() for k, v in metrics.items()}


def test_loss_of_a_hand_built_two_turn_pair_equals_the_formula():
    beta, g = 0.1, 0.7
    # per-turn summed log-probs of the assistant turns: chosen (success) row 0, rejected (failure) row 1
    policy = [[-3.0, -5.0], [-2.0, -6.0]]
    reference = [[-3.5, -4.0], [-1.0, -6.5]]
    # alpha_t = g^(t-1) (1 - g^(T-t+1)) / (1 - g^T) with T = 2 turns
    a1 = g**0 * (1 - g**2) / (1 - g**2)
    a2 = g**1 * (1 - g**1) / (1 - g**2)
    chosen = beta * (a1 * (-3.0 - -3.5) + a2 * (-5.0 - -4.0))
    rejected = beta * (a1 * (-2.0 - -1.0) + a2 * (-6.0 - -6.5))
    by_hand = -math.log(1 / (1 + math.exp(-(chosen - rejected))))
    loss, m = _loss(policy, reference, [turn_weights(2, g)] * 2, beta)
    assert loss == pytest.approx(by_hand, abs=1e-12)
    assert loss == pytest.approx(0.6500024, abs=1e-7)  # the same number, written out
    assert m["reward_chosen"] == pytest.approx(chosen) and m["reward_rejected"] == pytest.approx(rejected)
    assert m["reward_margin"] == pytest.approx(chosen - rejected) and m["reward_accuracy"] == 1.0


def test_each_trajectory_weighs_its_turns_by_its_own_length():
    # chosen has T = 2 turns, rejected T = 3: padding beyond a trajectory's turns weighs nothing
    g, beta = 0.5, 0.2
    policy = [[-1.0, -2.0, 0.0], [-1.0, -2.0, -3.0]]
    reference = [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    alpha = [[*turn_weights(2, g), 0.0], turn_weights(3, g)]
    w2 = [1.0, 0.5 * 0.5 / 0.75]
    w3 = [1.0, 0.5 * 0.75 / 0.875, 0.25 * 0.5 / 0.875]
    z = beta * (-1.0 * w2[0] - 2.0 * w2[1]) - beta * (-1.0 * w3[0] - 2.0 * w3[1] - 3.0 * w3[2])
    assert _loss(policy, reference, alpha, beta)[0] == pytest.approx(math.log1p(math.exp(-z)), abs=1e-12)


def test_gamma_zero_sees_only_the_first_turn_and_gamma_one_weighs_turns_linearly():
    ref = [[0.0, 0.0, 0.0]] * 2
    a0 = [turn_weights(3, 0.0)] * 2
    base = _loss([[-1.0, -2.0, -3.0], [-1.5, -2.0, -3.0]], ref, a0, 1.0)[0]
    later_turns_changed = _loss([[-1.0, -9.0, -0.1], [-1.5, -0.2, -7.0]], ref, a0, 1.0)[0]
    assert later_turns_changed == pytest.approx(base)
    a1 = [turn_weights(3, 1.0)] * 2
    z = (-1.0 * 3 - 2.0 * 2 - 3.0 * 1) / 3 - (-1.5 * 3 - 2.0 * 2 - 3.0 * 1) / 3
    assert _loss([[-1.0, -2.0, -3.0], [-1.5, -2.0, -3.0]], ref, a1, 1.0)[0] == pytest.approx(
        math.log1p(math.exp(-z))
    )


# ---------------------------------------------------------------------------------------------
# the chunked path on a real (tiny, random) Qwen3


@pytest.fixture(scope="module")
def tiny_model():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=97, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=8, max_position_embeddings=128,
                      tie_word_embeddings=True)  # fmt: skip
    return Qwen3ForCausalLM(cfg).double().eval()


def _pair(rng, lengths, turns_per_side):
    """A pair like pairs.parquet holds: ids, and per token its assistant turn (or -1)."""
    out = {}
    for side, n, t in zip(("chosen", "rejected"), lengths, turns_per_side):
        ids = rng.integers(0, 97, n)
        turn_ids = np.full(n, -1, np.int16)
        bounds = np.linspace(2, n, 2 * t + 1).astype(int)  # user / assistant spans alternate
        for k in range(t):
            turn_ids[bounds[2 * k + 1] : bounds[2 * k + 2]] = k
        out |= {f"{side}_input_ids": ids, f"{side}_turn_ids": turn_ids,
                f"{side}_reference": rng.normal(-20, 3, t)}  # fmt: skip
    return out


def _naive(model, batch, beta):
    """Full [N, L, vocab] logits, an explicit mask, per-turn sums by loops: the reference implementation."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    logits.retain_grad()
    logp = torch.log_softmax(logits.double(), -1)
    ref, alpha = torch.as_tensor(batch["reference"]), torch.as_tensor(batch["alpha"])
    per_turn = torch.zeros_like(ref)
    for b in range(logits.shape[0]):
        for p in range(1, logits.shape[1]):
            t = int(batch["turn_ids"][b, p])
            if t >= 0:
                per_turn[b, t] = per_turn[b, t] + logp[b, p - 1, batch["input_ids"][b, p]]
    return dmpo_loss(per_turn, ref, alpha, beta)[0], logits


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_chunked_loss_and_gradient_equal_the_full_logits_ones_and_flow_only_through_assistant_tokens(
    tiny_model, chunk
):
    rng = np.random.default_rng(1)
    batch = collate_pairs([_pair(rng, (40, 31), (2, 3)), _pair(rng, (25, 44), (3, 2))], pad_id=0, gamma=0.7)
    model, beta = tiny_model, 0.1
    model.zero_grad()
    naive, logits = _naive(model, batch, beta)
    naive.backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters()}
    # only the logits that predict an assistant token carry gradient: position p-1 for turn_ids[b, p] >= 0
    predicts_assistant = torch.zeros(logits.shape[:2], dtype=torch.bool)
    predicts_assistant[:, :-1] = batch["turn_ids"][:, 1:] >= 0
    assert logits.grad[~predicts_assistant].abs().max() == 0
    assert logits.grad[predicts_assistant].abs().sum(-1).min() > 0

    model.zero_grad()
    hidden = model.get_decoder()(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
    ).last_hidden_state
    ref = torch.as_tensor(batch["reference"])
    rows, targets, segments = target_rows(batch["input_ids"], batch["turn_ids"], ref.shape[1])
    loss, metrics = turn_objective(
        model.get_output_embeddings().weight, hidden.reshape(-1, hidden.shape[-1]), rows, targets, segments,
        ref.numel(), chunk, lambda pt: dmpo_loss(pt.view(ref.shape), ref, torch.as_tensor(batch["alpha"]), beta),
    )  # fmt: skip
    loss.backward()
    assert loss.item() == pytest.approx(naive.item(), rel=1e-6)
    for n, p in model.named_parameters():  # equal up to the fp32 log-softmax of the chunked path
        torch.testing.assert_close(p.grad, want[n], rtol=1e-5, atol=1e-6 * want[n].abs().max().item(), msg=n)
    assert set(metrics) == {"reward_chosen", "reward_rejected", "reward_margin", "reward_accuracy"}


def test_the_installed_forward_computes_the_same_loss(tiny_model):
    import copy

    model = copy.deepcopy(tiny_model)
    rng = np.random.default_rng(2)
    batch = collate_pairs([_pair(rng, (30, 30), (2, 2))], pad_id=0, gamma=0.7)
    naive = _naive(model, batch, 0.1)[0].item()
    install_dmpo_forward(model, beta=0.1, chunk=5)
    out = model(**batch)
    assert out["loss"].item() == pytest.approx(naive, rel=1e-6)
    # without turn_ids it is the model's own forward (generation)
    assert model(input_ids=batch["input_ids"][:1, :5]).logits.shape == (1, 5, 97)


def test_position_zero_is_never_a_target():
    ids = torch.zeros((1, 4), dtype=torch.long)
    with pytest.raises(ValueError, match="position 0"):
        target_rows(ids, torch.tensor([[0, -1, 0, 0]]), 1)
