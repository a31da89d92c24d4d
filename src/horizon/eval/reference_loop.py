"""The published Terminus-2's agent loop on a scripted model and terminal, and the template export.

Loaded by reference_driver.py (under the reference environment's interpreter); see its docstring
for the protocol. Only the edges are scripted: the model (replies in order; a call whose history +
prompt reaches `limit` tokens overflows, as a server would refuse it; tokens = sum(len(content) //
4 + 4), the same rule as horizon's scripted backend) and the tmux session (the incremental outputs
and screens it returns, and the keys sent). The export renders every turn kind with marker values
and turns the markers into placeholders.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from horizon_reference_driver import agent_class, content, op_incremental, site_file, tokens

# ---------------------------------------------------------------------------------------------
# the agent loop on a scripted model and terminal


class Exhausted(BaseException):
    """The script has no more replies: the scenario is over (not an Exception: nothing retries it)."""


class Script:
    """The scripted edges shared by both variants."""

    def __init__(self, sc: dict):
        self.sc, self.calls, self.keys = sc, [], []
        self.replies = list(sc.get("replies", []))
        self.outputs = list(sc["outputs"])
        self.screens = list(sc.get("screens") or ["$ "])
        self.timeouts = set(sc.get("timeouts", []))
        self.sends = 0

    def reply(self, prompt: str, history: list[dict]) -> tuple[str, str]:
        """(kind, content) of the next call: overflow | fail | length | stop."""
        messages = [dict(m) for m in history] + [{"role": "user", "content": prompt}]
        if tokens(messages) >= self.sc["limit"]:
            self.calls.append({"messages": messages, "overflow": True})
            return "overflow", ""
        if not self.replies:
            raise Exhausted()
        self.calls.append({"messages": messages, "overflow": False})
        r = self.replies.pop(0)
        if r.get("fail"):
            return "fail", ""
        if "length" in r:
            return "length", r["length"]
        return "stop", content(r["text"]) if self.sc.get("reasoning") else r["text"]

    def output(self) -> str:
        return self.outputs.pop(0) if len(self.outputs) > 1 else self.outputs[0]

    def screen(self) -> str:
        return self.screens.pop(0) if len(self.screens) > 1 else self.screens[0]

    def send(self, keys, duration) -> bool:
        """Record the keys; True when this send is scripted to time out."""
        self.keys.append([keys, duration])
        self.sends += 1
        return self.sends - 1 in self.timeouts


def _patch_parser(agent, sc: dict) -> None:
    forced = sc.get("parsed")
    if not forced:
        return
    forced = list(forced)
    mod = sys.modules[type(agent._parser).__module__]

    def parse(text):
        f = forced.pop(0) if len(forced) > 1 else forced[0]
        cmds = [mod.ParsedCommand(k, d) for k, d in f.get("commands", [])]
        return mod.ParseResult(cmds, f.get("complete", False), f.get("error", ""), f.get("warning", ""))

    agent._parser.parse_response = parse


def run_tb1(sc: dict) -> Script:
    from terminal_bench.llms.base_llm import ContextLengthExceededError, OutputLengthExceededError

    s = Script(sc)

    class LLM:
        def call(self, prompt, message_history=[], logging_path=None, **kw):  # noqa: B006 - their signature
            kind, text = s.reply(prompt, message_history)
            if kind == "overflow":
                raise ContextLengthExceededError()
            if kind == "fail":
                raise RuntimeError("scripted failure")
            if kind == "length":
                raise OutputLengthExceededError("length", truncated_response=text)
            return text

        def count_tokens(self, messages):
            return tokens(messages)

    class Session:
        def is_session_alive(self):
            return True

        def send_keys(self, keys, block=False, min_timeout_sec=0.0, max_timeout_sec=180.0):
            if s.send(keys, min_timeout_sec):
                raise TimeoutError("scripted timeout")

        def get_incremental_output(self):
            return s.output()

        def capture_pane(self, capture_entire=False):
            return s.screen()

        def get_asciinema_timestamp(self):
            return 0.0

    agent = agent_class("tb1")(model_name="openai/conformance", max_episodes=sc.get("max_episodes", 50))
    agent._llm = LLM()
    agent._count_total_tokens = lambda chat: tokens(chat._messages)
    agent._get_model_context_limit = lambda: sc["limit"]
    _patch_parser(agent, sc)
    try:
        agent.perform_task(sc["instruction"], Session())
        s.end = "done"
    except Exhausted:
        s.end = "exhausted"
    except Exception as e:  # noqa: BLE001 - their loop raised: part of what is compared
        s.end = f"error: {type(e).__name__}"
    return s


def run_harbor(sc: dict) -> Script:
    from harbor.llms.base import ContextLengthExceededError, LLMResponse, OutputLengthExceededError
    from harbor.models.agent.context import AgentContext

    s = Script(sc)

    class LLM:
        async def call(self, prompt, message_history=None, **kw):
            kind, text = s.reply(prompt, message_history or [])
            if kind == "overflow":
                raise ContextLengthExceededError()
            if kind == "fail":
                raise RuntimeError("scripted failure")
            if kind == "length":
                raise OutputLengthExceededError("length", truncated_response=text)
            return LLMResponse(content=text)

        def get_model_context_limit(self):
            return sc["limit"]

        def get_model_output_limit(self):
            return sc.get("output_limit")

    class Session:
        async def is_session_alive(self):
            return True

        async def send_keys(self, keys, block=False, min_timeout_sec=0.0, max_timeout_sec=180.0):
            if s.send(keys, min_timeout_sec):
                raise TimeoutError("scripted timeout")

        async def get_incremental_output(self):
            return s.output()

        async def capture_pane(self, capture_entire=False):
            return s.screen()

    with tempfile.TemporaryDirectory() as logs:
        agent = agent_class("harbor")(
            logs_dir=Path(logs), model_name="openai/conformance", max_turns=sc.get("max_episodes", 50),
            suppress_max_turns_warning=True, record_terminal_session=False,
            enable_summarize=sc.get("summarize", True),
            proactive_summarization_threshold=sc.get("threshold", 8000),
        )  # fmt: skip
        agent._llm = LLM()
        agent._session = Session()
        agent._count_total_tokens = lambda chat: tokens(chat.messages)
        _patch_parser(agent, sc)
        try:
            asyncio.run(agent.run(sc["instruction"], environment=None, context=AgentContext()))
            s.end = "done"
        except Exhausted:
            s.end = "exhausted"
        except Exception as e:  # noqa: BLE001 - their loop raised: part of what is compared
            s.end = f"error: {type(e).__name__}"
    return s


def op_loop(req: dict) -> dict:
    s = (run_harbor if req["variant"] == "harbor" else run_tb1)(req)
    return {"calls": s.calls, "keys": s.keys, "end": s.end}


# ---------------------------------------------------------------------------------------------
# export: every turn kind as a template (markers rendered, then turned into placeholders)

M = {k: f"\u27e6{k}\u27e7" for k in ("instruction", "screen", "output", "error", "warnings", "command",
                                      "timeout_sec", "limit", "summary", "questions", "answers")}  # fmt: skip


def _template(text: str, *names: str) -> str:
    for name in names:
        if M[name] not in text:
            raise SystemExit(f"export: the rendered turn lacks the value of {{{name}}}: {text[:200]!r}")
        text = text.replace(M[name], "{" + name + "}")
    return text


def _user_turns(s: Script) -> list[str]:
    return [c["messages"][-1]["content"] for c in s.calls]


def _export_turns(variant: str) -> dict:
    """Turns that follow a model answer: run their loop with the parser's result forced."""
    base = {"variant": variant, "instruction": M["instruction"], "limit": 10**9, "output_limit": M["limit"],
            "outputs": ["$ ", M["output"]], "screens": [M["screen"]]}  # fmt: skip
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
    s = run({**base, "parsed": [slow], "timeouts": [0], "replies": [{"text": "x"}, {"text": "x"}],
             "outputs": ["$ ", M["screen"]]})  # fmt: skip
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
    replies = [{"text": "x"}, {"text": M["summary"]}, {"text": M["questions"]}, {"text": M["answers"]},
               {"text": "x"}]  # fmt: skip
    sc = {"variant": variant, "instruction": M["instruction"], "outputs": ["$ ", "out"],
          "screens": [M["screen"]], "parsed": [{"commands": []}], "replies": replies, "threshold": 8000}  # fmt: skip
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
    sc = {"variant": "harbor", "instruction": M["instruction"], "outputs": ["$ ", "y" * 9000, "z" * 9000],
          "screens": [M["screen"]], "parsed": [{"commands": []}], "threshold": 0}  # fmt: skip
    first = run_harbor({**sc, "limit": 10**9, "replies": [{"text": "x"}] * 3})
    sc["limit"] = tokens(first.calls[2]["messages"]) - 1
    x, fail = {"text": "x"}, {"fail": True}
    s = run_harbor({**sc, "replies": [x, x, fail, {"text": M["summary"]}, x]})
    p = _user_turns(s)
    out = {"short_summary_request": _template(p[-2], "instruction", "screen"),
           "short_handoff": _template(p[-1], "instruction", "summary")}  # fmt: skip
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
    sc = {"variant": variant, "instruction": instruction, "outputs": ["$ "], "limit": limit,
          "parsed": [{"commands": []}], "replies": [{"text": "x"}] * 3}  # fmt: skip
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
    incr = op_incremental({"variant": variant, "captures": [["", M["screen"]], [M["output"], ""]]})
    out = {
        "source": f"terminus-2-{variant}",
        "initial": _template(initial, "instruction", "screen"),
        "terminal_screen": _template(incr[0], "screen"),
        "terminal_new": _template(incr[1], "output"),
        "truncation": _truncation_marker(cls),
        **_export_turns(variant),
        **_export_summary(variant),
        "overflow_prompt": _overflow_prompt(variant),
        "loop": {"variant": variant, "summary_in_history": variant == "tb1",
                 "repeat_length_error": variant == "tb1", "overflow_fallbacks": variant == "harbor"},
        "parser_module": str(site_file(variant)),
    }  # fmt: skip
    return out
