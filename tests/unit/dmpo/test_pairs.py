"""DMPO's preference pairs from the policy's own attempts: seeded, counted, and an error when there is none."""

import numpy as np
import pyarrow.parquet as pq
import pytest

from horizon.data.chatml import ChatSerializer
from horizon.dmpo.pairs import NoPairs, assistant_turn_ids, build_pairs, draw_pairs
from tests.unit.dmpo.attempts import conversation, write_attempts


def test_pairs_are_a_success_and_a_failure_of_the_same_task_seeded_and_counted(tmp_path, tiny_corpus):
    shard0, shard1 = tmp_path / "s0", tmp_path / "s1"
    shard0.mkdir(), shard1.mkdir()
    files = [
        write_attempts(shard0, {"mixed": [True, False, True, False], "solved": [True, True, True, True]}),
        write_attempts(shard1, {"failed": [False, "infra", False, False]}),
    ]
    tok = str(tiny_corpus / "student")
    out = lambda name: (str(tmp_path / f"{name}.parquet"), str(tmp_path / f"{name}.json"))  # noqa: E731
    s = build_pairs(
        files, tok, *out("p"), policy="single-K8", task_set="train-tasks", pairs_per_task=3, seed=7
    )
    assert (s["tasks"], s["attempts"], s["successes"], s["failures"], s["infra_errors"]) == (3, 12, 6, 5, 1)
    assert (s["pairs"], s["tasks_with_pairs"], s["tasks_without_success"], s["tasks_without_failure"]) == (
        3,
        1,
        1,
        1,
    )
    table = pq.read_table(tmp_path / "p.parquet").to_pylist()
    assert {r["task"] for r in table} == {"mixed"} and len({r["pair_id"] for r in table}) == 3
    for r in table:
        assert r["chosen_attempt"] in (0, 2) and r["rejected_attempt"] in (1, 3)
    # the same seed draws the same pairs, byte for byte
    build_pairs(files, tok, *out("q"), policy="single-K8", task_set="train-tasks", pairs_per_task=3, seed=7)
    assert (tmp_path / "p.parquet").read_bytes() == (tmp_path / "q.parquet").read_bytes()
    # each trajectory is our ChatML serialization of the attempt up to its last assistant turn
    from horizon.data.tokenizer import load

    r = table[0]
    msgs = conversation("mixed", r["chosen_attempt"], 2 + r["chosen_attempt"])[:-1]
    want = ChatSerializer(load(tok)).serialize(msgs)
    assert r["chosen_input_ids"] == want.input_ids.tolist() and r["chosen_roles"] == want.roles.tolist()
    assert (
        r["chosen_n_turns"] == 2 + r["chosen_attempt"] and r["rejected_n_turns"] == 2 + r["rejected_attempt"]
    )


def test_drawn_pairs_are_all_of_them_when_fewer_and_a_seeded_sample_otherwise():
    assert draw_pairs([1], [0, 2], 5, 0, "t") == [(1, 0), (1, 2)]
    a = draw_pairs(list(range(5)), list(range(5, 10)), 4, 0, "t")
    assert len(set(a)) == 4 and a == draw_pairs(list(range(5)), list(range(5, 10)), 4, 0, "t")
    assert any(draw_pairs(list(range(5)), list(range(5, 10)), 4, s, "t") != a for s in range(1, 5))


def test_no_pair_at_all_is_an_error_naming_the_policy_the_task_set_and_the_counts(tmp_path, tiny_corpus):
    f = write_attempts(tmp_path, {"a": [True, True], "b": [False, "infra"]})
    with pytest.raises(NoPairs) as e:
        build_pairs([f], str(tiny_corpus / "student"), str(tmp_path / "p.parquet"), str(tmp_path / "p.json"),
                    policy="single-K640", task_set="demo/train-tasks", pairs_per_task=2, seed=0)  # fmt: skip
    msg = str(e.value)
    assert "policy single-K640" in msg and "task set demo/train-tasks" in msg
    assert "2 tasks, 4 attempts (2 successes, 1 failures, 1 infrastructure errors" in msg
    assert "1 tasks without a success, 1 without a failure" in msg
    assert not (tmp_path / "p.parquet").exists()


def test_assistant_turn_ids_tag_content_and_im_end_of_each_assistant_turn(tiny_tokenizer):
    s = ChatSerializer(tiny_tokenizer).serialize(conversation("x", 0, 2)[:-1])
    ids = assistant_turn_ids(s.roles, s.turns)
    assert set(np.unique(ids)) == {-1, 0, 1}
    assert np.array_equal(ids >= 0, s.roles == 1) and ids[0] == -1
    assert set(s.turns[ids == 0]) == {1} and set(s.turns[ids == 1]) == {
        3
    }  # messages 1 and 3 are the assistant's
