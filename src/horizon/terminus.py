"""The Terminus-2 response format: what a model answers and how it is parsed.

An assistant turn is optional reasoning (`<think>...</think>`) followed by one JSON object with
`analysis`, `plan`, `commands` ([{keystrokes, duration}]) and optionally `task_complete`. The parser
is shared by corpus normalization (is the last turn a valid completion?), the agent loop and the
scripted teacher, so all three agree on what counts as a valid answer.

It decides exactly as the published Terminus-2 parser does (harbor 0.26.0 and terminal-bench
0.2.18; tests/conformance proves it case by case against the installed packages), written here in
our own code and words:
- `answer_view`: what the harness is handed. A Qwen3 model served by vLLM (0.11) with its reasoning
  parser hands over only what follows `</think>` when the answer has both tags, else the raw text.
- the object is the first top-level `{...}` of one left-to-right scan that tracks strings and
  backslashes (also outside strings, as theirs does); text around it is a warning;
- a failed parse is retried twice: with the missing closing braces appended, then with the first
  valid JSON object nested at most two levels deep; a repair that works is a warning;
- missing `analysis`/`plan`/`commands`, a non-list `commands`, a malformed command are errors; an
  ill-typed `analysis`/`plan`/`task_complete`/`duration`, unknown command fields, a command not
  ending in a newline before another one, fields out of order are warnings;
- `task_complete` given as a string is true for "true", "1", "yes" (any case); other values are
  taken by truthiness; with `task_complete` set, a malformed command only costs the commands.
Each error and warning is an `Issue` (a code and its arguments), worded here in our own words; the
agent can word them as Terminus-2 does instead (horizon.eval.reference.environment).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

THINK_END = "</think>"
THINK_START = "<think>"
DEFAULT_DURATION = 1.0
REQUIRED = ("analysis", "plan", "commands")
VARIANTS = ("harbor", "tb1")  # the two published parsers differ in one warning (see _commands)


@dataclass(frozen=True)
class Issue:
    """One error or warning of the parser: a code and what it is about."""

    code: str
    args: tuple = ()

    def __str__(self) -> str:
        return _WORDS[self.code](*self.args)


_WORDS = {
    "no_json": lambda: "The answer holds no complete JSON object.",
    "no_json_object": lambda: "No JSON object was found.",
    "invalid_json": lambda why, body: f"The JSON object does not parse ({why}): {body[:80]!r}",
    "not_object": lambda: "The answer must be a JSON object.",
    "missing_fields": lambda *names: f"These fields are required but absent: {', '.join(names)}.",
    "commands_not_array": lambda: "`commands` must be a list.",
    "command_not_object": lambda n: f"Item {n} of `commands` is not an object.",
    "command_no_keystrokes": lambda n: f"Item {n} of `commands` has no `keystrokes`.",
    "keystrokes_not_string": lambda n: f"The `keystrokes` of item {n} must be text.",
    "text_before": lambda: "There is text before the JSON object.",
    "text_after": lambda: "There is text after the JSON object.",
    "field_not_string": lambda name: f"`{name}` should be text.",
    "field_order": lambda found, wanted: (
        f"The fields came as {', '.join(found)}; expected {', '.join(wanted)}."
    ),
    "task_complete_type": lambda: "`task_complete` should be true/false (or a string).",
    "duration_missing": lambda n: f"Item {n} has no `duration`; {DEFAULT_DURATION} s was used.",
    "duration_invalid": lambda n: (
        f"Item {n} has a `duration` that is not a number; {DEFAULT_DURATION} s was used."
    ),
    "unknown_fields": lambda n, *names: f"Item {n} has fields this format does not know: {', '.join(names)}.",
    "missing_newline": lambda n: (
        f"Item {n} does not end with a newline, so the next item is typed on the same line."
    ),
    "auto_fixed": lambda how: f"The answer was repaired ({how}); please send well-formed JSON.",
}
ERROR_CODES = frozenset(
    {
        "no_json",
        "invalid_json",
        "not_object",
        "missing_fields",
        "commands_not_array",
        "command_not_object",
        "command_no_keystrokes",
        "keystrokes_not_string",
    }
)


class ParseError(ValueError):
    """The response cannot be acted on; the message is fed back to the model."""

    def __init__(self, response: Response):
        super().__init__(str(response.error))
        self.response = response


@dataclass(frozen=True)
class Command:
    keystrokes: str
    duration: float = DEFAULT_DURATION


@dataclass
class Response:
    """One parsed answer. `error` set means nothing can be run (the warnings still count)."""

    commands: list[Command]
    complete_value: Any = False  # task_complete as Terminus-2 returns it (bool, or int/None/... as given)
    error: Issue | None = None
    warnings: list[Issue] = field(default_factory=list)
    analysis: Any = ""
    plan: Any = ""

    @property
    def task_complete(self) -> bool:
        """What the loop acts on: Terminus-2 tests the value's truthiness."""
        return bool(self.complete_value)


def answer_view(text: str | None) -> str:
    """The part of a raw model answer a Terminus-2 harness parses (see the module docstring)."""
    if not text:
        return ""
    if THINK_START not in text or THINK_END not in text:
        return text
    after_start = text.split(THINK_START, 1)[1]
    if THINK_END not in after_start:
        return after_start
    return after_start.split(THINK_END, 1)[1]


def parse(text: str | None, variant: str = "harbor") -> Response:
    """Parse a raw model answer (reasoning included) as Terminus-2 would be handed it. Never raises."""
    return parse_answer(answer_view(text), variant)


def parse_response(text: str | None, variant: str = "harbor") -> Response:
    """Like parse(), but raises ParseError when nothing can be run."""
    r = parse(text, variant)
    if r.error is not None:
        raise ParseError(r)
    return r


def parse_answer(answer: str, variant: str = "harbor") -> Response:
    """Parse exactly `answer` (no reasoning split): the first try, then the two repairs."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown Terminus-2 parser variant {variant!r} (one of {', '.join(VARIANTS)})")
    first = _attempt(answer, variant)
    if first.error is None:
        return first
    for how, repair in (("closing braces added", _close_braces), ("object extracted", _extract_shallow)):
        fixed = repair(answer, first.error)
        if fixed is None:
            continue
        second = _attempt(fixed, variant)
        if second.error is None:
            second.warnings.insert(0, Issue("auto_fixed", (how,)))
            return second
    return first


def _scan_object(text: str) -> tuple[int, int] | None:
    """[start, end) of the first top-level {...}: strings toggle on every unescaped quote, and a
    backslash hides the next character wherever it is (prose included)."""
    depth, start, in_str, hide = 0, None, False, False
    for i, ch in enumerate(text):
        if hide:
            hide = False
        elif ch == "\\":
            hide = True
        elif ch == '"':
            in_str = not in_str
        elif in_str:
            continue
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0 and start is not None:
                return start, i + 1
    return None


def _attempt(text: str, variant: str) -> Response:
    warnings: list[Issue] = []
    span = _scan_object(text)
    if span is None:
        return Response([], False, Issue("no_json"), [Issue("no_json_object")])
    start, end = span
    if text[:start].strip():
        warnings.append(Issue("text_before"))
    if text[end:].strip():
        warnings.append(Issue("text_after"))
    body = text[start:end]
    try:
        data = json.loads(body)
    except json.JSONDecodeError as e:
        return Response([], False, Issue("invalid_json", (str(e), body)), warnings)
    error = _check_structure(data, body, warnings)
    if error is not None:
        return Response([], False, error, warnings)
    done = data.get("task_complete", False)
    if isinstance(done, str):
        done = done.lower() in ("true", "1", "yes")
    commands, error = _commands(data["commands"], warnings, variant)
    analysis, plan = data["analysis"], data["plan"]
    if error is None:
        return Response(commands, done, None, warnings, analysis, plan)
    if done:  # finishing anyway: the broken command costs only the commands
        warnings.append(error)
        return Response([], True, None, warnings, analysis, plan)
    return Response([], False, error, warnings, analysis, plan)


def _check_structure(data: Any, body: str, warnings: list[Issue]) -> Issue | None:
    if not isinstance(data, dict):
        return Issue("not_object")
    missing = tuple(k for k in REQUIRED if k not in data)
    if missing:
        return Issue("missing_fields", missing)
    for key in ("analysis", "plan"):
        if not isinstance(data[key], str):
            warnings.append(Issue("field_not_string", (key,)))
    if not isinstance(data["commands"], list):
        return Issue("commands_not_array")
    _field_order(body, warnings)
    done = data.get("task_complete")
    if done is not None and not isinstance(done, bool | str):
        warnings.append(Issue("task_complete_type"))
    return None


def _field_order(body: str, warnings: list[Issue]) -> None:
    """The first `"key":` of each required key in the text must come in the canonical order."""
    found = {}
    for key in REQUIRED:
        m = re.search(rf'"{key}"\s*:', body)
        if m:
            found[key] = m.start()
    if len(found) < 2:
        return
    wanted = tuple(k for k in REQUIRED if k in found)
    seen = tuple(sorted(found, key=found.get))
    if seen != wanted:
        warnings.append(Issue("field_order", (seen, wanted)))


def _commands(items: list, warnings: list[Issue], variant: str) -> tuple[list[Command], Issue | None]:
    out = []
    for n, item in enumerate(items, 1):
        if not isinstance(item, dict):
            return [], Issue("command_not_object", (n,))
        if "keystrokes" not in item:
            return [], Issue("command_no_keystrokes", (n,))
        keys = item["keystrokes"]
        if not isinstance(keys, str):
            return [], Issue("keystrokes_not_string", (n,))
        duration = item.get("duration", DEFAULT_DURATION)
        if "duration" not in item:
            warnings.append(Issue("duration_missing", (n,)))
        elif not isinstance(duration, int | float):  # (a bool is an int: true waits 1 s)
            warnings.append(Issue("duration_invalid", (n,)))
            duration = DEFAULT_DURATION
        unknown = set(item) - {"keystrokes", "duration"}
        if unknown:
            warnings.append(Issue("unknown_fields", (n, *sorted(unknown))))
        # harbor lets an empty wait precede a command; terminal-bench warns about it too
        if n < len(items) and (keys or variant == "tb1") and not keys.endswith("\n"):
            warnings.append(Issue("missing_newline", (n,)))
        out.append(Command(keys, _seconds(duration)))
    return out, None


def _seconds(value: int | float) -> float:
    try:
        return float(value)
    except OverflowError:  # an integer too large for a float: wait as long as allowed
        return math.inf


def _close_braces(text: str, error: Issue) -> str | None:
    """Append the missing `}` (counted over the whole text, strings included)."""
    if error.code not in ("invalid_json", "no_json"):
        return None
    missing = text.count("{") - text.count("}")
    return text + "}" * missing if missing > 0 else None


def _extract_shallow(text: str, error: Issue) -> str | None:
    """The first span {...} nested at most two levels deep (braces only, strings ignored) that is
    valid JSON; spans are taken left to right without overlap."""
    i, n = 0, len(text)
    while i < n:
        if text[i] != "{":
            i += 1
            continue
        end = _shallow_end(text, i)
        if end is None:
            i += 1
            continue
        try:
            json.loads(text[i:end])
            return text[i:end]
        except json.JSONDecodeError:
            i = end
    return None


def _shallow_end(text: str, start: int) -> int | None:
    depth = 1
    for j in range(start + 1, len(text)):
        ch = text[j]
        if ch == "{":
            if depth == 2:
                return None
            depth = 2
        elif ch == "}":
            if depth == 1:
                return j + 1
            depth = 1
    return None


def render_response(
    analysis: str,
    plan: str,
    commands: list[Command],
    task_complete: bool = False,
    reasoning: str | None = None,
) -> str:
    """The canonical text of an assistant turn (used by the scripted teacher)."""
    body = json.dumps(
        {
            "analysis": analysis,
            "plan": plan,
            "commands": [{"keystrokes": c.keystrokes, "duration": c.duration} for c in commands],
            "task_complete": task_complete,
        },
        indent=2,
        ensure_ascii=False,
    )
    if reasoning is None:
        return body
    return f"{THINK_START}\n{reasoning}\n{THINK_END}\n\n{body}"
