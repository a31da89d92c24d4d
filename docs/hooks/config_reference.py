"""mkdocs hook: the configuration reference, generated from workflow/schemas/config.schema.yaml.

docs/configuration/reference.md holds one marker line; every build replaces it with a section per
top-level key and a row per key (type, default, allowed values, description), so the page can never
say something the schema that validates the config does not. Registered under `hooks:` in mkdocs.yml;
tests/unit/test_docs.py renders it without mkdocs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"
PAGE = "configuration/reference.md"
MARKER = "<!-- config-reference -->"
LONG_DEFAULT = 48  # characters: a longer default is shown as a YAML block under its section's table


@dataclass(frozen=True)
class Key:
    """One row of the reference: a config key as the schema defines it."""

    path: str  # dotted, `<name>` for a mapping's entries, `[]` for a list's items
    type: str
    default: object
    has_default: bool
    required: bool
    allowed: str
    description: str


def _resolve(node: dict, defs: dict) -> dict:
    ref = node.get("$ref")
    return defs[ref.rsplit("/", 1)[-1]] if ref else node


def _fields(node: dict) -> tuple[dict, list]:
    """The properties of an object node (a nullable object keeps them under if/then)."""
    if "properties" in node:
        return node["properties"], node.get("required", [])
    then = node.get("then", {})
    return then.get("properties", {}), then.get("required", [])


def _type(node: dict, defs: dict) -> str:
    node = _resolve(node, defs)
    types = node.get("type", "any")
    names = types if isinstance(types, list) else [types]
    out = []
    for name in names:
        if name == "array" and isinstance(node.get("items"), dict):
            out.append(f"list of {_type(node['items'], defs)}")
        elif name == "object" and isinstance(node.get("additionalProperties"), dict) and not _fields(node)[0]:
            out.append(f"mapping of name to {_type(node['additionalProperties'], defs)}")
        else:
            out.append(name)
    return " or ".join(out)


def _yaml(value) -> str:
    """A scalar as a config file spells it (true, not True)."""
    return json.dumps(value) if isinstance(value, bool) or value is None else str(value)


def _allowed(node: dict) -> str:
    bounds = [
        ("minimum", "≥ {}"),
        ("exclusiveMinimum", "> {}"),
        ("maximum", "≤ {}"),
        ("exclusiveMaximum", "< {}"),
        ("minItems", "at least {} item(s)"),
        ("maxItems", "at most {} item(s)"),
        ("minProperties", "at least {} entries"),
    ]
    out = [fmt.format(node[key]) for key, fmt in bounds if key in node]
    if "enum" in node:
        out.insert(0, ", ".join(f"`{_yaml(v)}`" for v in node["enum"]))
    if "const" in node:
        out.insert(0, f"only `{json.dumps(node['const'])}`")
    items = node.get("items")
    if isinstance(items, dict) and "enum" in items:
        out.append("each one of " + ", ".join(f"`{_yaml(v)}`" for v in items["enum"]))
    if node.get("uniqueItems"):
        out.append("no duplicates")
    if "pattern" in node:
        out.append(f"matches `{node['pattern']}`")
    if "pattern" in node.get("propertyNames", {}):
        out.append(f"names match `{node['propertyNames']['pattern']}`")
    return "; ".join(out)


def _children(node: dict, defs: dict, path: str) -> Iterator[tuple[str, dict, bool]]:
    """(path, node, required) of the keys below an object, a mapping's entries or a list's items."""
    props, required = _fields(node)
    for name, child in props.items():
        yield f"{path}.{name}" if path else name, child, name in required
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) and _fields(_resolve(extra, defs))[0]:
        yield f"{path}.<name>", extra, False
    items = node.get("items")
    if isinstance(items, dict) and _fields(items)[0]:
        yield f"{path}[]", items, False


def walk(node: dict, defs: dict, path: str = "") -> Iterator[Key]:
    """Every key below node, depth first, in the schema's order."""
    for child_path, child, required in _children(_resolve(node, defs), defs, path):
        resolved = _resolve(child, defs)
        yield Key(
            path=child_path,
            type=_type(resolved, defs),
            default=resolved.get("default"),
            has_default="default" in resolved,
            required=required,
            allowed=_allowed(resolved),
            description=" ".join(str(resolved.get("description", "")).split()),
        )
        yield from walk(resolved, defs, child_path)


def _escape(text: str) -> str:
    """Markdown-safe table cell text: code spans kept as they are, the rest escaped."""
    parts = re.split(r"(`[^`]*`)", text)
    for i in range(0, len(parts), 2):  # the odd parts are code spans (a table keeps their pipes)
        part = parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        parts[i] = re.sub(r"([|*_\[\]])", r"\\\1", part)
    return "".join(parts)


def _default_cell(key: Key) -> str:
    if not key.has_default:
        return "required" if key.required else "–"
    text = json.dumps(key.default, ensure_ascii=False)
    return "see below" if len(text) > LONG_DEFAULT else f"`{text}`"


def anchor(path: str) -> str:
    """The HTML id of a key's row: the dotted path, `name` for a mapping's entries, nothing for list items."""
    return path.replace("<name>", "name").replace("[]", "")


def render_section(title: str, description: str, rows: list[Key]) -> str:
    lines = [f"## {title}", ""]
    if description:
        lines += [_escape(" ".join(description.split())), ""]
    lines += ["| key | type | default | allowed | description |", "|---|---|---|---|---|"]
    for i, k in enumerate(rows):
        meaning = "" if i == 0 and description else _escape(k.description)  # said above the table
        cells = [
            f'<a id="{anchor(k.path)}"></a>`{k.path}`',
            _escape(k.type),
            _default_cell(k),
            _escape(k.allowed),
            meaning,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    for k in rows:
        if _default_cell(k) == "see below":
            dumped = yaml.safe_dump(
                {k.path: k.default}, sort_keys=False, allow_unicode=True, width=100, default_flow_style=None
            )
            lines += ["", f"Default of `{k.path}`:", "", "```yaml", dumped.rstrip(), "```"]
    return "\n".join(lines)


def render(schema_path: Path = SCHEMA) -> str:
    """The whole reference: one section per top-level key, in the schema's order."""
    schema = yaml.safe_load(schema_path.read_text())
    defs = schema.get("$defs", {})
    keys = list(walk(schema, defs))
    top = [k for k in keys if "." not in k.path and "[" not in k.path]
    groups = [k.path for k in top if k.type.startswith("object")]
    sections = [render_section("Top-level keys", "", [k for k in top if k.path not in groups])]
    for name in groups:
        rows = [k for k in keys if k.path == name or k.path.startswith((f"{name}.", f"{name}["))]
        node = _resolve(schema["properties"][name], defs)
        sections.append(render_section(f"`{name}`", str(node.get("description", "")), rows))
    return "\n\n".join(sections) + "\n"


def on_page_markdown(markdown: str, page, **kwargs) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/{PAGE} lost its marker line {MARKER}: the reference has nowhere to go")
    return markdown.replace(MARKER, render())
