"""Observation masking in the token shards: the framing and the turns kept, the setting recorded, and
training refusing stale shards."""

import pyarrow.parquet as pq
import pytest

from horizon.data.tokens import drop_observations, observation_forms
from tests.helpers import REPO


def test_drop_observations_keeps_the_framing_and_the_turns():
    forms = observation_forms(REPO / "demo" / "prompt.yaml")
    conv = [
        {"role": "user", "content": "Task Description:\nx\n\nCurrent terminal state:\nroot@box:/app# "},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "New Terminal Output:\nroot@box:/app# ls\ndata.csv\nroot@box:/app# "},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "Your answer could not be used:\nbad\n\nReply with one valid JSON object."},
        {"role": "assistant", "content": "a3"},
        {"role": "user", "content": "Warnings:\n- w\n\nNew Terminal Output:\n3\n\nShould I mark the task as complete? "
                                    "Reply with task_complete true again to confirm."},
        {"role": "assistant", "content": "a4"},
    ]  # fmt: skip
    out = drop_observations(conv, forms)
    assert [m["role"] for m in out] == [m["role"] for m in conv] and out[0] == conv[0]
    assert out[2]["content"] == "New Terminal Output:\n"
    assert out[4] == conv[4]  # a parse-error reply is not an observation
    assert out[6]["content"] == ("Warnings:\n- w\n\nNew Terminal Output:\n\n\nShould I mark the task as complete? "
                                 "Reply with task_complete true again to confirm.")  # fmt: skip
    assert [m["content"] for m in out[1::2]] == ["a1", "a2", "a3", "a4"]


def test_masked_shards_record_the_setting_and_training_refuses_stale_ones(tiny_corpus, tmp_path):
    from horizon.data.tokens import shards_observations, tokenize_shard
    from horizon.train.examples import check_observations

    template = tmp_path / "prompt.yaml"  # the fixture corpus's harness: "New Terminal Output:\n{output}"
    template.write_text('observation: "New Terminal Output:\\n{output}"\nconfirm: "{output}\\n\\nAre you sure'
                        ' you want to mark the task as complete? If so, include \\"task_complete\\": true in your'
                        ' JSON response again."\n')  # fmt: skip
    keep, drop = tmp_path / "keep.parquet", tmp_path / "drop.parquet"
    tokenize_shard(tiny_corpus / "traj.parquet", tiny_corpus / "student", keep, 0, 1)
    tokenize_shard(tiny_corpus / "traj.parquet", tiny_corpus / "student", drop, 0, 1, observations="drop",
                   template=template)  # fmt: skip
    assert shards_observations([keep, drop]) == {str(keep): "keep", str(drop): "drop"}
    n_keep = pq.read_table(keep, columns=["n_tokens"]).column("n_tokens").to_pylist()
    n_drop = pq.read_table(drop, columns=["n_tokens"]).column("n_tokens").to_pylist()
    assert all(d < k for d, k in zip(n_drop, n_keep))  # the terminal output is gone, the turns stay
    turns = pq.read_table(drop, columns=["turns"]).column("turns").to_pylist()
    traj = pq.read_table(tiny_corpus / "traj.parquet", columns=["n_turns"]).column("n_turns").to_pylist()
    assert [max(t) + 1 for t in turns] == traj
    check_observations([drop], "drop")
    with pytest.raises(
        ValueError, match="tokenized with train.observations = keep, but the config says drop"
    ):
        check_observations([keep], "drop")
    with pytest.raises(ValueError, match="needs the prompt template"):
        tokenize_shard(tiny_corpus / "traj.parquet", tiny_corpus / "student", drop, 0, 1, observations="drop")
