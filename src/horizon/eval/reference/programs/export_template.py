"""Write the published Terminus-2's prompt turns as a horizon prompt template (`export_template`).

A program for the reference environment's interpreter (`.venv-harbor/bin/python`, Python >= 3.12,
`make refenv`), run by horizon.eval.reference.environment.run_program; it imports only the standard
library and the two reference packages. stdin: a JSON list of requests {"op": "export", "variant": V}
(V: "harbor" or "tb1"); stdout: a JSON list of templates, one per request. Every turn kind is rendered
through their agent loop on scripted edges (terminus_loop.py, beside this file) with marker values,
and the markers are turned into placeholders.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # only the reference packages import
os.environ.setdefault("OPENAI_API_KEY", "unused")
LOOP_MODULE = "horizon_terminus_loop"


def load_loop():
    """terminus_loop.py beside this file, loaded by path once (this directory is not on sys.path)."""
    if LOOP_MODULE not in sys.modules:
        spec = importlib.util.spec_from_file_location(LOOP_MODULE, HERE / "terminus_loop.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[LOOP_MODULE] = mod
        spec.loader.exec_module(mod)
    return sys.modules[LOOP_MODULE]


loop = load_loop()
agent_class, incremental, site_file, tokens = loop.agent_class, loop.incremental, loop.site_file, loop.tokens
run_harbor, run_tb1 = loop.run_harbor, loop.run_tb1

# ---------------------------------------------------------------------------------------------
# export: every turn kind as a template (markers rendered, then turned into placeholders)

M = {
    k: f"\u27e6{k}\u27e7"
    for k in tuple(
        "instruction screen output error warnings command timeout_sec limit summary questions answers".split()
    )
}


def _template(text: str, *names: str) -> str:
    for name in names:
        if M[name] not in text:
            raise SystemExit(f"export: the rendered turn lacks the value of {{{name}}}: {text[:200]!r}")
        text = text.replace(M[name], "{" + name + "}")
    return text


def _user_turns(s) -> list[str]:
    return [c["messages"][-1]["content"] for c in s.calls]


def _export_turns(variant: str) -> dict:
    """Turns that follow a model answer: run their loop with the parser's result forced."""
    base = {
        "variant": variant,
        "instruction": M["instruction"],
        "limit": 10**9,
        "output_limit": M["limit"],
        "outputs": ["$ ", M["output"]],
        "screens": [M["screen"]],
    }
    run = run_harbor if variant == "harbor" else run_tb1
    ok = {"commands": [["ls\n", 0.1]]}
    err, warn = {"error": M["error"]}, {"warning": M["warnings"]}
    turns = {}
    for kind, parsed, names in (
        ("parse_error", [err], ("error",)),
        ("parse_error_warnings", [{**err, **warn}], ("error", "warnings")),
        ("observation", [ok], ("output",)),
        ("warnings", [{**ok, **warn}], ("warnings", "output")),
        ("confirm", [{**ok, "complete": True}], ("output",)),
    ):
        s = run({**base, "parsed": parsed, "replies": [{"text": "x"}, {"text": "x"}]})
        turns[kind] = _template(_user_turns(s)[1], *names)
    slow = {"commands": [[M["command"], 7.25]]}
    s = run(
        {
            **base,
            "parsed": [slow],
            "timeouts": [0],
            "replies": [{"text": "x"}, {"text": "x"}],
            "outputs": ["$ ", M["screen"]],
        }
    )
    timeout = _user_turns(s)[1].replace("7.25", M["timeout_sec"])  # the turn is the timeout text itself
    turns["timeout"] = _template(timeout, "command", "timeout_sec", "screen")
    for kind, parsed, names in (
        ("output_too_long", [{}], ("limit",)),
        ("output_too_long_warnings", [warn], ("limit", "warnings")),
    ):
        s = run({**base, "parsed": parsed, "replies": [{"length": "x"}, {"text": "x"}, {"text": "x"}]})
        text = _user_turns(s)[1]
        turns[kind] = _template(text, *names) if M["limit"] in text else _template(text, *names[1:])
    return turns


def _export_summary(variant: str) -> dict:
    """The summarisation prompts: a proactive summary right before the second call."""
    run = run_harbor if variant == "harbor" else run_tb1
    replies = [
        {"text": "x"},
        {"text": M["summary"]},
        {"text": M["questions"]},
        {"text": M["answers"]},
        {"text": "x"},
    ]
    sc = {
        "variant": variant,
        "instruction": M["instruction"],
        "outputs": ["$ ", "out"],
        "screens": [M["screen"]],
        "parsed": [{"commands": []}],
        "replies": replies,
        "threshold": 8000,
    }
    first = run({**sc, "limit": 10**9})
    sc["limit"] = (
        tokens(first.calls[1]["messages"][:-1]) + 7999
    )  # free tokens just under the threshold at call 2
    s = run(sc)
    prompts = _user_turns(s)
    out = {
        "summary_request": _template(prompts[1], "instruction"),
        "questions": _template(prompts[2], "instruction", "summary", "screen"),
        "answers_request": _template(prompts[3], "questions"),
        "handoff": _template(prompts[4], "answers"),
    }
    if variant == "harbor":
        out.update(_export_fallbacks())
    return out


def _export_fallbacks() -> dict:
    """Harbor's fallbacks when the summary fails on overflow: a short summary, then none. The third
    call overflows; unwinding drops the second exchange and keeps the first, so a summary is tried."""
    sc = {
        "variant": "harbor",
        "instruction": M["instruction"],
        "outputs": ["$ ", "y" * 9000, "z" * 9000],
        "screens": [M["screen"]],
        "parsed": [{"commands": []}],
        "threshold": 0,
    }
    first = run_harbor({**sc, "limit": 10**9, "replies": [{"text": "x"}] * 3})
    sc["limit"] = tokens(first.calls[2]["messages"]) - 1
    x, fail = {"text": "x"}, {"fail": True}
    s = run_harbor({**sc, "replies": [x, x, fail, {"text": M["summary"]}, x]})
    p = _user_turns(s)
    out = {
        "short_summary_request": _template(p[-2], "instruction", "screen"),
        "short_handoff": _template(p[-1], "instruction", "summary"),
    }
    s = run_harbor({**sc, "replies": [x, x, fail, fail, x]})
    out["fallback_handoff"] = _template(_user_turns(s)[-1], "instruction", "screen")
    return out


def _truncation_marker(cls) -> str:
    """The line their output truncation puts between head and tail (12,000 bytes cut to 10,000)."""
    cut = cls._limit_output_length(None, "a" * 6000 + "b" * 6000, 10000)
    marker = cut[5000:-5000]
    whole = cut.startswith("a" * 5000) and cut.endswith("b" * 5000)
    if not whole or marker[:1] == "a" or marker[-1:] == "b" or "2000" not in marker.replace("10000", ""):
        raise SystemExit(f"export: unexpected truncation {marker!r}")
    return marker.replace("10000", "{limit}").replace("2000", "{omitted}")


def _overflow_prompt(variant: str) -> str:
    """What is sent after an overflow, around the handoff: overflow the very first call (nothing to
    summarise, so the handoff is the instruction itself) and look at the next send."""
    limit = 9000  # above terminal-bench's fixed proactive threshold, so only the overflow path runs
    instruction = "I" * (4 * limit)
    sc = {
        "variant": variant,
        "instruction": instruction,
        "outputs": ["$ "],
        "limit": limit,
        "parsed": [{"commands": []}],
        "replies": [{"text": "x"}] * 3,
    }
    calls = (run_harbor if variant == "harbor" else run_tb1)(sc).calls
    prompt, sent = calls[0]["messages"][-1]["content"], calls[1]["messages"][-1]["content"]
    if sent == instruction:
        return "{handoff}"
    if sent.startswith(instruction) and sent.endswith(prompt):
        return "{handoff}" + sent[len(instruction) : -len(prompt)] + "{prompt}"
    raise SystemExit(f"export: unexpected send after an overflow: {sent[:200]!r}")


def op_export(req: dict) -> dict:
    variant = req["variant"]
    cls = agent_class(variant)
    with tempfile.TemporaryDirectory() as logs:
        agent = (
            cls(logs_dir=Path(logs), model_name="openai/x")
            if variant == "harbor"
            else cls(model_name="openai/x")
        )
        initial = agent._prompt_template.format(instruction=M["instruction"], terminal_state=M["screen"])
    incr = incremental({"variant": variant, "captures": [["", M["screen"]], [M["output"], ""]]})
    out = {
        "source": f"terminus-2-{variant}",
        "initial": _template(initial, "instruction", "screen"),
        "terminal_screen": _template(incr[0], "screen"),
        "terminal_new": _template(incr[1], "output"),
        "truncation": _truncation_marker(cls),
        **_export_turns(variant),
        **_export_summary(variant),
        "overflow_prompt": _overflow_prompt(variant),
        "loop": {
            "variant": variant,
            "summary_in_history": variant == "tb1",
            "repeat_length_error": variant == "tb1",
            "overflow_fallbacks": variant == "harbor",
        },
        "parser_module": str(site_file(variant)),
    }
    return out


def main() -> None:
    import logging

    logging.disable(logging.CRITICAL)  # their loggers would write into our stdout protocol
    requests = json.load(sys.stdin)
    results = [{"export": op_export}[r["op"]](r) for r in requests]
    sys.stdout.write(json.dumps(results))


if __name__ == "__main__":
    main()
