"""A rollout's tokenizer read without transformers gives the same ids and text as transformers' own."""

import json
import random
import shutil

import pytest

from horizon.data.chatml import ChatSerializer
from horizon.data.tokenizer import load_serializing
from tests.unit.data.test_chatml import conversations


@pytest.fixture(params=["tiny", "qwen"])
def tok(request, tiny_tokenizer, qwen_tokenizer):
    return tiny_tokenizer if request.param == "tiny" else qwen_tokenizer


def test_read_straight_from_tokenizer_json_with_the_same_ids_and_text(tok):
    from tokenizers import Tokenizer

    light = load_serializing(tok.name_or_path)
    assert isinstance(light, Tokenizer)  # transformers was not needed
    ours, theirs = ChatSerializer(light), ChatSerializer(tok)
    for a, b in zip(ours.serialize_batch(conversations()), theirs.serialize_batch(conversations())):
        assert a.input_ids.tolist() == b.input_ids.tolist()
        assert a.roles.tolist() == b.roles.tolist()
    for conv in conversations():
        assert ours.prompt_ids(conv) == theirs.prompt_ids(conv)
    rng = random.Random(0)
    n = len(tok)
    specials = [tok.convert_tokens_to_ids(t) for t in ("<|im_start|>", "<|im_end|>", "<think>")]
    for _ in range(300):  # any ids: cut UTF-8 sequences, specials, the added tokens at the end
        ids = [rng.randrange(n) for _ in range(rng.randrange(1, 40))] + rng.sample(specials, 2)
        rng.shuffle(ids)
        for skip in (False, True):
            assert light.decode(ids, skip_special_tokens=skip) == tok.decode(ids, skip_special_tokens=skip)


@pytest.mark.parametrize(
    "change",
    [
        {"tokenizer_class": "Qwen2Tokenizer"},
        {"clean_up_tokenization_spaces": True},
        {"split_special_tokens": True},
        {"auto_map": {"AutoTokenizer": ["mine.Tok", None]}},
        {"added_tokens_decoder": {"5000": {"content": "<|mine|>", "special": True}}},  # not in the file
        {"eos_token": "<|not_a_token|>"},
        {"model_type": "qwen2"},  # config.json: transformers swaps a qwen2 model's hub class
    ],
    ids=lambda c: next(iter(c)),
)
def test_any_other_tokenizer_goes_through_transformers(tiny_tokenizer_dir, tmp_path, change):
    other = tmp_path / "tok"
    shutil.copytree(tiny_tokenizer_dir, other)
    if "model_type" in change:
        (other / "config.json").write_text(json.dumps(change))
    else:
        config = json.loads((other / "tokenizer_config.json").read_text())
        (other / "tokenizer_config.json").write_text(json.dumps({**config, **change}))
    assert getattr(load_serializing(other), "is_fast", False)  # transformers' own object


def test_a_model_directory_of_the_student_is_read_straight(tiny_tokenizer_dir, tmp_path):
    from tokenizers import Tokenizer

    model = tmp_path / "model"
    shutil.copytree(tiny_tokenizer_dir, model)
    (model / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    assert isinstance(load_serializing(model), Tokenizer)
