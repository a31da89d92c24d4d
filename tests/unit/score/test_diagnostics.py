"""The horizon diagnostics (our reconstruction) on hand-built cases, every number computed by hand."""

import numpy as np
import pytest

from horizon.score.diagnostics import _bias, local_difficulty, per_step


def test_per_step_groups_token_logprobs_by_assistant_turn():
    # turns: user 0 (pos 0-2), assistant 1 (3-5), user 2 (6-7), assistant 3 (8-10)
    roles = np.array([0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1], dtype=np.int8)
    turns = np.array([0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3], dtype=np.int16)
    positions = np.array([3, 4, 5, 8, 9, 10])
    logprobs = np.array([-1.0, -2.0, -3.0, -0.5, -0.5, -2.0])
    steps = per_step(logprobs, positions, roles, turns)
    assert steps == [
        {"step": 0, "start": 3, "n_tokens": 3, "mean_ll": pytest.approx(-2.0)},
        {"step": 1, "start": 8, "n_tokens": 3, "mean_ll": pytest.approx(-1.0)},
    ]


def test_local_difficulty_is_a_trailing_moving_average():
    x = [-1.0, -3.0, -2.0, -6.0, 0.0]
    # w = 2: [-1, (-1-3)/2, (-3-2)/2, (-2-6)/2, (-6+0)/2]
    assert local_difficulty(x, 2).tolist() == pytest.approx([-1.0, -2.0, -2.5, -4.0, -3.0])
    # w = 3: the first steps average what exists so far
    assert local_difficulty(x, 3).tolist() == pytest.approx([-1.0, -2.0, -2.0, -11 / 3, -8 / 3])


def test_bias_proxy_inside_and_beyond_the_horizon():
    """B(H) = mean over supervised tokens of log p_ref - log p_H; split at the horizon's position."""
    pos = np.array([2, 5, 9, 12])  # token positions of one trajectory's supervised tokens
    ref = np.array([-1.0, -1.0, -1.0, -1.0])  # the longest-horizon model (K = 16)
    h8 = np.array([-1.0, -2.0, -3.0, -5.0])  # gaps 0, 1, 2, 4: positions 2, 5 inside K = 8
    other = {"t2": (np.array([-2.0]), np.array([3]))}  # a second trajectory, gap 1 (ref below: -1)
    per_token = {
        16: {"t1": (ref, pos), "t2": (np.array([-1.0]), np.array([3]))},
        8: {"t1": (h8, pos), **other},
    }
    rows = {r["horizon"]: r for r in _bias(per_token, 16, "heldout")}
    assert rows[8]["bias"] == pytest.approx((0 + 1 + 2 + 4 + 1) / 5)
    assert rows[8]["bias_within_horizon"] == pytest.approx((0 + 1 + 1) / 3)  # positions 2, 5 and 3 < 8
    assert rows[8]["bias_beyond_horizon"] == pytest.approx((2 + 4) / 2)
    assert rows[8]["n_tokens"] == 5 and rows[8]["n_beyond"] == 2 and rows[8]["n_trajectories"] == 2
    assert (
        rows[16]["bias"] == 0.0 and rows[16]["reference"] == "single-K16" and rows[8]["model"] == "single-K8"
    )
