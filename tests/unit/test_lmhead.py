"""lmhead: a right-padded batch needs no attention mask under causal attention; the ZeRO-3 head weight; the
head matmul's dtype; nll's gradients to a frozen side (its equality with the plain loss: tests/unit/train/test_loss.py)."""

import pytest
import torch

from horizon.lmhead import causal_mask
from tests.unit.train.test_loss import batch, tiny_qwen3


def test_right_padding_needs_no_mask_and_any_other_mask_is_kept():
    right = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0]])
    assert causal_mask(right) is None and causal_mask(torch.ones(2, 4, dtype=torch.long)) is None
    assert causal_mask(None) is None
    left = torch.tensor([[0, 1, 1], [1, 1, 1]])
    hole = torch.tensor([[1, 0, 1], [1, 1, 1]])
    assert causal_mask(left) is left and causal_mask(hole) is hole


def test_real_positions_are_the_same_bits_without_the_mask_of_a_right_padded_batch():
    trunk = tiny_qwen3().get_decoder()
    ids, mask, _ = batch()
    assert not bool(mask.all())  # row 1 is right-padded
    with torch.no_grad():
        masked = trunk(input_ids=ids, attention_mask=mask).last_hidden_state
        unmasked = trunk(input_ids=ids, attention_mask=causal_mask(mask)).last_hidden_state
    real = mask.bool()
    assert torch.equal(masked[real], unmasked[real])


def test_a_zero3_head_weight_is_gathered_with_the_model_and_a_plain_one_is_left_alone():
    from horizon.lmhead import register_weight

    model, head = torch.nn.Linear(2, 2), torch.nn.Linear(2, 3)
    register_weight(model, head.weight)  # not partitioned: nothing to gather
    assert not hasattr(model, "ds_external_parameters")
    head.weight.ds_id = 7  # what ZeRO-3 sets on every parameter it partitions
    register_weight(model, head.weight)
    assert [p for _, p in model.ds_external_parameters()] == [head.weight]


def test_the_head_matmul_runs_in_the_dtype_the_plain_head_would():
    """autocast's dtype when it is on (as F.linear then computes), else the weight's; a float64 weight
    is left alone by autocast, and by the chunked head."""
    import torch.nn.functional as F

    from horizon.lmhead import _matmul_dtype

    w, h = torch.zeros(3, 2), torch.zeros(1, 2)
    assert _matmul_dtype(w) == F.linear(h, w).dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert _matmul_dtype(w) == F.linear(h, w).dtype == torch.bfloat16
        assert _matmul_dtype(w.double()) == F.linear(h.double(), w.double()).dtype == torch.float64


@pytest.mark.parametrize("frozen", ["head", "hidden", "neither"])
def test_nll_gradients_reach_whatever_requires_them(frozen):
    """A frozen head (or frozen hidden states) still passes the gradient to the other side, equal to the
    plain cross-entropy's."""
    import torch.nn.functional as F

    from horizon.lmhead import nll

    g = torch.Generator().manual_seed(0)
    hidden, weight = torch.randn(6, 8, generator=g), torch.randn(11, 8, generator=g)
    rows, targets = torch.tensor([0, 2, 3, 5]), torch.tensor([1, 10, 4, 4])
    grads = []
    for chunked in (True, False):
        h = hidden.clone().requires_grad_(frozen != "hidden")
        w = weight.clone().requires_grad_(frozen != "head")
        loss = (
            nll(w, h, rows, targets, 3, 4.0)
            if chunked
            else F.cross_entropy(h[rows] @ w.T, targets, reduction="sum") / 4
        )
        loss.backward()
        grads.append((h.grad, w.grad))
    for ours, plain in zip(*grads):
        assert (ours is None) == (plain is None)
        if plain is not None:
            torch.testing.assert_close(ours, plain)


def test_log_softmax_per_row_whatever_the_rows_scales_and_nll_sums_by_default():
    """Each row is shifted by its own maximum: a row of logits near 1000 beside one near 0 loses
    nothing to underflow; without a divisor nll is the summed negative log-likelihood."""
    import torch.nn.functional as F

    from horizon.lmhead import chunk_logprobs, nll

    logits, targets = torch.tensor([[0.0, 1.0, -2.0], [1000.0, 1001.0, 990.0]]), torch.tensor([0, 1])
    expected = torch.log_softmax(logits.double(), dim=1)[[0, 1], targets]
    torch.testing.assert_close(chunk_logprobs(logits.clone(), targets), expected)
    loss = nll(torch.eye(3), logits, torch.tensor([0, 1]), targets, 2)  # an identity head: the logits
    plain = F.cross_entropy(logits.double(), targets, reduction="sum").item()
    assert loss.item() == pytest.approx(plain, rel=1e-4)  # fp32 round-off near 1000
