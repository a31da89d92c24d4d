"""The Terminus-2 response format: what a model answers and how it is parsed.

An assistant turn is optional reasoning (`<think>...</think>`) followed by one JSON object with
`analysis`, `plan`, `commands` ([{keystrokes, duration}]) and optionally `task_complete`. The parser
is shared by corpus normalization (is the last turn a valid completion?), the agent loop and the
scripted teacher, so all three agree on what counts as a valid answer.

The rules, written for this project (not taken from any harness): look only after the first
`</think>`; take the first balanced JSON object there; anything else around it is a warning; a
missing or ill-typed required field is an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

THINK_END = "</think>"
THINK_START = "<think>"
DEFAULT_DURATION = 1.0


class ParseError(ValueError):
    """The response cannot be acted on; the message is fed back to the model."""


@dataclass(frozen=True)
class Command:
    keystrokes: str
    duration: float = DEFAULT_DURATION


@dataclass
class Response:
    analysis: str
    plan: str
    commands: list[Command]
    task_complete: bool = False
    warnings: list[str] = field(default_factory=list)


def split_reasoning(text: str) -> tuple[str | None, str]:
    """(reasoning, answer): the answer is what follows the first `</think>` (all of it if none)."""
    head, sep, tail = text.partition(THINK_END)
    if sep:
        reasoning = head.split(THINK_START, 1)[-1]
        return reasoning.strip("\n"), tail
    if THINK_START in text:
        # thinking never ended: there is no answer yet
        return text.split(THINK_START, 1)[1], ""
    return None, text


_DECODER = json.JSONDecoder()


def find_json_object(text: str) -> tuple[int, int] | None:
    """Span [start, end) of the first balanced {...} in text, honouring JSON strings and escapes."""
    start = text.find("{")
    if start == -1:
        return None
    try:  # fast path (C): a valid JSON object from the first brace is exactly that balanced span
        _, end = _DECODER.raw_decode(text, start)
        return start, end
    except json.JSONDecodeError:
        pass
    while start != -1:
        depth = 0
        in_str = False
        esc = False
        for i in range(start, len(text)):
            ch = text[i]
            if in_str:
                if esc:
                    esc = False
                elif ch == "\\":
                    esc = True
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return start, i + 1
        # unbalanced from this brace: no later brace can close either
        return None
    return None


def parse_response(text: str) -> Response:
    """Parse one assistant turn. Raises ParseError with a message meant for the model."""
    if text is None:
        raise ParseError("Empty response.")
    _, answer = split_reasoning(text)
    if not answer.strip():
        if THINK_START in text and THINK_END not in text:
            raise ParseError("The reasoning block was not closed with </think> and no JSON object followed.")
        raise ParseError("No JSON object found in the response.")
    span = find_json_object(answer)
    if span is None:
        if "{" in answer:
            raise ParseError("The JSON object is not closed (unbalanced braces).")
        raise ParseError("No JSON object found in the response.")
    start, end = span
    warnings = []
    if answer[:start].strip():
        warnings.append("Extra text before the JSON object was ignored.")
    if answer[end:].strip():
        warnings.append("Extra text after the JSON object was ignored.")
    try:
        obj = json.loads(answer[start:end])
    except json.JSONDecodeError as e:
        raise ParseError(f"Invalid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise ParseError("The response must be a JSON object.")
    missing = [k for k in ("analysis", "plan", "commands") if k not in obj]
    if missing:
        raise ParseError(f"Missing required field(s): {', '.join(missing)}.")
    for key in ("analysis", "plan"):
        if not isinstance(obj[key], str):
            raise ParseError(f"Field '{key}' must be a string.")
    if not isinstance(obj["commands"], list):
        raise ParseError("Field 'commands' must be a list.")
    commands = []
    for i, cmd in enumerate(obj["commands"]):
        if not isinstance(cmd, dict):
            raise ParseError(f"Command {i + 1} must be an object with 'keystrokes' and 'duration'.")
        if not isinstance(cmd.get("keystrokes"), str):
            raise ParseError(f"Command {i + 1} is missing a string 'keystrokes' field.")
        duration = cmd.get("duration")
        if duration is None:
            warnings.append(f"Command {i + 1} has no 'duration'; {DEFAULT_DURATION} s was used.")
            duration = DEFAULT_DURATION
        elif isinstance(duration, bool) or not isinstance(duration, int | float) or duration < 0:
            raise ParseError(
                f"Command {i + 1} has an invalid 'duration' (a non-negative number is required)."
            )
        commands.append(Command(cmd["keystrokes"], float(duration)))
    done = obj.get("task_complete", False)
    if isinstance(done, str) and done.lower() in ("true", "false"):
        warnings.append("Field 'task_complete' should be a boolean, not a string.")
        done = done.lower() == "true"
    if not isinstance(done, bool):
        raise ParseError("Field 'task_complete' must be a boolean.")
    return Response(obj["analysis"], obj["plan"], commands, done, warnings)


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
