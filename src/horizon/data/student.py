"""The student model: resolve it to a local directory, or build a tiny one offline.

Every stage that needs the student (tokenize, train, score, rollout of `base`) reads the resolved
local paths from results/student/student.json, written once by the `student` rule (on the login
node for a hub id: compute nodes often have no internet).
"""

from __future__ import annotations

import logging
from pathlib import Path

from horizon.io import write_json

log = logging.getLogger("horizon.data.student")

HUB_PATTERNS = ["*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken", "*.jinja", "*.py"]


def resolve(model: str, out_path: str | Path, revision: str = "main", tokenizer: str | None = None) -> dict:
    def local_or_hub(name: str) -> tuple[str, str | None]:
        p = Path(name)
        if p.exists():
            if not (p / "config.json").exists() and not (p / "tokenizer.json").exists():
                raise FileNotFoundError(f"student {name}: a directory without config.json or tokenizer.json")
            return str(p.resolve()), None
        if p.is_absolute() or name.startswith(".") or name.count("/") != 1:
            raise FileNotFoundError(
                f"student.model {name!r}: no such directory, and not a hub id (owner/name)"
            )
        from huggingface_hub import snapshot_download

        snap = Path(snapshot_download(repo_id=name, revision=revision, allow_patterns=HUB_PATTERNS))
        return str(snap), snap.name

    model_path, resolved = local_or_hub(model)
    tok_path = local_or_hub(tokenizer)[0] if tokenizer else model_path
    info = {"model": model_path, "tokenizer": tok_path, "source": model, "resolved_revision": resolved}
    write_json(out_path, info)
    log.info("student: %s", info)
    return info


def tiny_qwen3_config(vocab_size: int, build: dict, tokenizer=None):
    """A Qwen3 architecture of the given (small) shape."""
    from transformers import Qwen3Config

    ids = {}
    if tokenizer is not None:
        ids = {
            "pad_token_id": tokenizer.pad_token_id,
            "eos_token_id": tokenizer.eos_token_id,
            "bos_token_id": None,
        }
    return Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=build["hidden_size"],
        intermediate_size=build["intermediate_size"],
        num_hidden_layers=build["num_hidden_layers"],
        num_attention_heads=build["num_attention_heads"],
        num_key_value_heads=build["num_key_value_heads"],
        head_dim=build["head_dim"],
        max_position_embeddings=build["max_position_embeddings"],
        tie_word_embeddings=True,
        **ids,
    )


def build_tokenizer(trajectories: str | Path, out_dir: str | Path, build: dict):
    """The built student's tokenizer: a byte-level BPE trained on every turn of the corpus, in its order
    (build_tiny's, and what `horizon init` and `horizon check-corpus` measure lengths with)."""
    import pyarrow.parquet as pq

    from horizon.data.tokenizer import train_bpe

    def texts():
        pf = pq.ParquetFile(trajectories)
        for batch in pf.iter_batches(batch_size=64, columns=["conversations"]):
            for conv in batch.column("conversations").to_pylist():
                for m in conv:
                    yield m["content"]

    return train_bpe(
        texts(), out_dir, vocab_size=build["vocab_size"], model_max_length=build["max_position_embeddings"]
    )


def build_tiny(trajectories: str | Path, out_dir: str | Path, build: dict, seed: int = 0) -> dict:
    """Offline student for tests and the demo: a BPE trained on the corpus + a random-init Qwen3.

    Saved as an ordinary HF model directory, so `student.model: <out_dir>` loads it like any other.
    """
    import torch
    from transformers import AutoModelForCausalLM

    from horizon.io import atomic_path

    with atomic_path(out_dir) as tmp:
        tok = build_tokenizer(trajectories, tmp, build)
        torch.manual_seed(seed)
        cfg = tiny_qwen3_config(len(tok), build, tok)
        model = AutoModelForCausalLM.from_config(cfg)
        model.save_pretrained(tmp)
        n_params = sum(p.numel() for p in model.parameters())
    log.info("tiny student: %d parameters, vocabulary %d, saved to %s", n_params, len(tok), out_dir)
    return {"parameters": n_params, "vocab_size": len(tok)}
