"""A stage's answer as files: `<file path="relative/path">...</file>` blocks, and nothing is inferred.

The prompts ask for exactly this shape. An answer that is not it (no block, a path outside what the
stage may write, a required file missing, an unclosed block) raises BadAnswer naming what is wrong;
the cascade asks again, then rejects the seed at that stage with the raw answer stored.
"""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath

from horizon.terminus import answer_view

BLOCK = re.compile(r'<file\s+path="([^"]+)"\s*>\n?(.*?)</file>', re.S)
MAX_FILE_BYTES = 200_000


class BadAnswer(ValueError):
    """The answer is not the requested files (or verdict); the message says how."""


def _check_path(path: str, allowed: tuple[str, ...]) -> str:
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise BadAnswer(f"file path {path!r} is not a relative path inside the task")
    norm = str(p)
    if not any(norm == a or norm.startswith(a.rstrip("/") + "/") for a in allowed):
        raise BadAnswer(f"file path {path!r} is outside what this stage writes ({', '.join(allowed)})")
    return norm


def parse_files(answer: str, required: tuple[str, ...], allowed: tuple[str, ...]) -> dict[str, str]:
    """{path: content} from an answer; BadAnswer when it is not the requested files."""
    text = answer_view(answer or "")  # a reasoning model's thinking is not the answer
    blocks = BLOCK.findall(text)
    if not blocks:
        hint = " (a <file> block is not closed)" if "<file" in text else ""
        raise BadAnswer(f"no <file path=...> block in the answer{hint}")
    if text.count("<file ") != len(blocks):
        raise BadAnswer(f"{text.count('<file ')} <file> blocks opened, {len(blocks)} closed")
    files: dict[str, str] = {}
    for path, content in blocks:
        norm = _check_path(path.strip(), allowed)
        if len(content.encode()) > MAX_FILE_BYTES:
            raise BadAnswer(f"{norm}: {len(content.encode())} bytes (more than {MAX_FILE_BYTES})")
        files[norm] = content if content.endswith("\n") or not content else content + "\n"
    missing = [r for r in required if r not in files]
    if missing:
        raise BadAnswer(f"required file(s) missing: {', '.join(missing)} (got {', '.join(sorted(files))})")
    return files


def parse_review(answer: str) -> tuple[bool, list[str]]:
    """(approved, findings) from the reviewer's JSON object {"approve": bool, "findings": [str]}."""
    text = answer_view(answer or "")
    start = text.find("{")
    if start == -1:
        raise BadAnswer("no JSON object in the review")
    try:
        obj, _ = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as e:
        raise BadAnswer(f"the review's JSON is invalid: {e}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("approve"), bool):
        raise BadAnswer('the review has no boolean "approve"')
    findings = obj.get("findings", [])
    if not isinstance(findings, list) or not all(isinstance(f, str) for f in findings):
        raise BadAnswer('the review\'s "findings" is not a list of strings')
    if not obj["approve"] and not findings:
        raise BadAnswer("the review rejects the tests without a finding")
    return obj["approve"], findings
