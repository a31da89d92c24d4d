"""The student model: resolve it to a local directory, or build a tiny one offline.

Every stage that needs the student (tokenize, train, score, rollout of `base`) reads the resolved
local paths from results/student/student.json, written once by the `student` rule (on the login
node for a hub id: compute nodes often have no internet).
"""

from __future__ import annotations

import logging
from pathlib import Path

from horizon.io import write_json

log = logging.getLogger("horizon.student")

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
