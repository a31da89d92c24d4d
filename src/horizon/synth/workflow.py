"""The `synth` rule's one call: the config's synth.* keys -> endpoints, seeds, a synthesis run."""

from __future__ import annotations

import os
from pathlib import Path

from horizon.eval.models.backends import ChatBackend
from horizon.synth.cascade import SynthSettings
from horizon.synth.run import synthesize
from horizon.synth.seeds import load_seeds


def backends(cfg: dict) -> tuple[ChatBackend, ChatBackend]:
    """(author, reviewer): the reviewer is another model, at the author's endpoint unless it has its own."""
    key = os.environ.get(cfg["api_key_env"])
    common = {
        "temperature": cfg["temperature"],
        "api_key": key,
        "retries": cfg["max_retries"],
        "timeout": cfg["timeout_s"],
    }
    author = ChatBackend(cfg["endpoint"], cfg["model"], **common)
    reviewer = ChatBackend(
        cfg["review_endpoint"] or cfg["endpoint"], cfg["review_model"] or cfg["model"], **common
    )
    return author, reviewer


def run_synth(cfg: dict, prompts_dir: str | Path, out_dir: str | Path, sandbox: str, options: dict) -> dict:
    from horizon.eval.sandbox import toolchain

    seeds = load_seeds(cfg["seeds"], cfg["domains"], cfg["min_score"])
    settings = SynthSettings.from_config(cfg)
    author, reviewer = backends(cfg)
    with toolchain.shared() as tools:
        return synthesize(
            seeds,
            author,
            reviewer,
            settings,
            prompts_dir,
            out_dir,
            sandbox,
            {"toolchain": tools, **options},
            cfg["concurrency"],
        )
