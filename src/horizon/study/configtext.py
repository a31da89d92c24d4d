"""A config written as commented YAML: nested sections, one comment per key saying why it has its value.

`render` takes the keys in the order they should appear (dotted names), so a section's keys stay
together and the file reads top-down like the demo's; the values are written in YAML's flow style, so
that loading the text gives back exactly the config (tested).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import yaml

from horizon.study.choose import Choice

COMMENT_AT = 44  # the column comments start at (when the line is shorter)
BARE = re.compile(r"[A-Za-z0-9_/.@~+-][A-Za-z0-9_/.@~+ -]*")


def scalar(value: Any) -> str:
    """A value in YAML flow style: plain when it reads back as the same string, else JSON (valid YAML)."""
    if isinstance(value, str) and BARE.fullmatch(value) and yaml.safe_load(value) == value:
        return value
    if isinstance(value, list):
        return "[" + ", ".join(scalar(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {scalar(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float) and "e" in repr(value) and "." not in repr(value):
        mantissa, exponent = repr(value).split("e")
        return f"{mantissa}.0e{exponent}"  # YAML 1.1 reads 1e-05 as a string, 1.0e-05 as a float
    return json.dumps(value)


def _line(indent: int, key: str, value: str | None, why: str) -> str:
    text = f"{'  ' * indent}{key}:" + (f" {value}" if value is not None else "")
    return f"{text.ljust(COMMENT_AT - 1)} # {why}" if why else text


def render(
    choices: Sequence[Choice], header: Sequence[str] = (), section_notes: dict[str, str] | None = None
) -> str:
    """The YAML text of the choices (dotted keys), sections opened in first-seen order, with comments."""
    notes = dict(section_notes or {})
    lines = [f"# {h}" if h else "#" for h in header]
    opened: list[str] = []
    for choice in grouped(choices):
        parts = choice.key.split(".")
        for depth in range(len(parts) - 1):
            prefix = ".".join(parts[: depth + 1])
            if prefix not in opened:
                if depth == 0:
                    lines.append("")
                    lines += [f"# {n}" for n in notes.pop(prefix, "").splitlines()]
                opened.append(prefix)
                lines.append(_line(depth, parts[depth], None, ""))
        if len(parts) == 1:
            lines.append("")
            lines += [f"# {n}" for n in notes.pop(choice.key, "").splitlines()]
        lines.append(_line(len(parts) - 1, parts[-1], scalar(choice.value), choice.why))
    return "\n".join(lines).lstrip("\n") + "\n"


def grouped(choices: Sequence[Choice]) -> list[Choice]:
    """The choices with each section's keys together, sections in the order they first appear."""
    first: dict[str, int] = {}
    for i, choice in enumerate(choices):
        parts = choice.key.split(".")
        for depth in range(1, len(parts) + 1):
            first.setdefault(".".join(parts[:depth]), i)

    def order(choice: Choice) -> list[int]:
        parts = choice.key.split(".")
        return [first[".".join(parts[:depth])] for depth in range(1, len(parts) + 1)]

    return sorted(choices, key=order)


def as_dict(choices: Sequence[Choice]) -> dict:
    """The config the choices make (what the rendered text loads as)."""
    out: dict = {}
    for choice in choices:
        *path, last = choice.key.split(".")
        node = out
        for p in path:
            node = node.setdefault(p, {})
        node[last] = choice.value
    return out
