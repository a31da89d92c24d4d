import numpy as np
import pytest

from horizon.data.chatml import IM_END, KEEP_THINKING_TEMPLATE, ChatSerializer, render
from tests.helpers import fixture_rows

ADVERSARIAL = [
    {"role": "user", "content": "\n\nstarts with blank lines"},
    {"role": "assistant", "content": "\n<think>\nnewline first\n</think>\n\n{}"},
    {"role": "user", "content": "  two spaces first"},
    {"role": "assistant", "content": " \n space then newline"},
    {"role": "user", "content": ""},
    {"role": "assistant", "content": ""},
    {"role": "user", "content": "\u0301combining accent first, ünïcode ✓, 日本語"},
    {"role": "assistant", "content": '<think>\n\n</think>\n\n{"commands": []}\t'},
    {"role": "user", "content": "contains <|im_end|> and <|im_start|>user inside"},
    {"role": "assistant", "content": "\tTab first, digits 1234567890"},
]


def reference(tok, messages):
    ids = tok.apply_chat_template(messages, tokenize=True, chat_template=KEEP_THINKING_TEMPLATE)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


@pytest.fixture(params=["tiny", "qwen"])
def tok(request, tiny_tokenizer, qwen_tokenizer):
    return tiny_tokenizer if request.param == "tiny" else qwen_tokenizer


def conversations():
    return [r["conversations"] for r in fixture_rows()] + [ADVERSARIAL]


def test_matches_apply_chat_template_token_for_token(tok):
    ser = ChatSerializer(tok)
    for conv, s in zip(conversations(), ser.serialize_batch(conversations())):
        assert s.input_ids.tolist() == reference(tok, conv)
        assert s.input_ids.dtype == np.int32 and s.roles.dtype == np.int8 and s.turns.dtype == np.int16
        assert len(s.roles) == len(s.turns) == len(s.input_ids)


def test_supervised_tokens_are_assistant_content_plus_im_end(tok):
    ser = ChatSerializer(tok)
    for conv in conversations():
        s = ser.serialize(conv)
        for t, m in enumerate(conv):
            mask = s.turns == t
            sup = s.input_ids[mask & (s.roles == 1)].tolist()
            if m["role"] == "assistant":
                if m["content"][:1].isspace():
                    # the exact path: a token straddling "assistant\n" and the content stays unsupervised,
                    # so at most the content's leading white space is not supervised
                    full = m["content"] + IM_END
                    got = tok.decode(sup)
                    assert full.endswith(got) and full[: len(full) - len(got)].strip() == ""
                else:
                    assert tok.decode(sup) == m["content"] + IM_END
                    assert sup == tok(m["content"], add_special_tokens=False)["input_ids"] + [
                        tok.convert_tokens_to_ids(IM_END)
                    ]
            else:
                assert sup == []
        # every turn owns a contiguous run, in order
        assert np.all(np.diff(s.turns) >= 0) and s.turns[-1] == len(conv) - 1


def test_render_is_the_template():
    conv = fixture_rows()[0]["conversations"]
    from jinja2 import Template

    assert render(conv, add_generation_prompt=True) == Template(KEEP_THINKING_TEMPLATE).render(
        messages=conv, add_generation_prompt=True
    )


def test_prompt_ids_end_with_generation_header(tiny_tokenizer):
    ser = ChatSerializer(tiny_tokenizer)
    conv = fixture_rows()[0]["conversations"][:1]
    ids = ser.prompt_ids(conv)
    assert tiny_tokenizer.decode(ids).endswith("<|im_start|>assistant\n")
    assert ids == reference(tiny_tokenizer, conv) + ser.head("assistant")


def test_tokenizer_without_chatml_is_rejected():
    from tokenizers import Tokenizer, models

    with pytest.raises(ValueError, match="no <|im_start|> token"):
        ChatSerializer(Tokenizer(models.BPE()))
