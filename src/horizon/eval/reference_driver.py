"""Drive the published Terminus-2 (harbor 0.26.0, terminal-bench 0.2.18) on given inputs.

This file is a script for the reference environment's interpreter (`.venv-harbor/bin/python`,
Python >= 3.12, `make refenv`); it never runs inside horizon's own environment and imports only the
standard library and the two reference packages. It reads a JSON list of requests on stdin and
writes a JSON list of results on stdout:

  {"op": "parse", "variant": V, "texts": [...]}      their JSON parser on each text
  {"op": "limit", "variant": V, "texts": [...], "max_bytes": N}    their output truncation
  {"op": "incremental", "variant": V, "captures": [[history, screen], ...]}  their tmux diff
  {"op": "incremental_many", "variant": V, "cases": [captures, ...]}   the same for several cases
  {"op": "keys", "variant": V, "payloads": [...]}    the tmux commands their session runs per payload
  {"op": "loop", "variant": V, ...scenario...}       their agent loop on a scripted model and terminal
  {"op": "tmux_real", "variant": V, ...}              their tmux session on this machine's tmux
  {"op": "export", "variant": V}                      their prompt turns as a horizon template

V is "harbor" or "tb1". The loop runs their own code end to end; only the edges are scripted: the
model (replies in order; a call whose history + prompt reaches `limit` tokens overflows, as a
server would refuse it; tokens = sum(len(content) // 4 + 4), the same rule as horizon's scripted
backend) and the tmux session (the incremental outputs and screens it returns, and the keys sent).
The export renders every turn kind with marker values and turns the markers into placeholders.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_API_KEY", "unused")

PARSER = {
    "harbor": "harbor/agents/terminus_2/terminus_json_plain_parser.py",
    "tb1": "terminal_bench/agents/terminus_2/terminus_json_plain_parser.py",
}
PACKAGE = {"harbor": "harbor", "tb1": "terminal_bench"}


def site_file(variant: str) -> Path:
    """A file of the installed distribution, found without importing the package."""
    spec = importlib.util.find_spec(PACKAGE[variant])
    if spec is None or spec.origin is None:
        raise SystemExit(f"the {PACKAGE[variant]} package is not installed in {sys.prefix}")
    return Path(spec.origin).parents[1] / PARSER[variant]


def load_parser(variant: str):
    path = site_file(variant)
    name = f"_terminus_parser_{variant}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod.TerminusJSONPlainParser()


def agent_class(variant: str):
    if variant == "harbor":
        from harbor.agents.terminus_2.terminus_2 import Terminus2
    else:
        from terminal_bench.agents.terminus_2.terminus_2 import Terminus2
    return Terminus2


def content(text: str) -> str:
    """What vLLM 0.11's qwen3 reasoning parser hands over as the answer's content."""
    if "<think>" not in text or "</think>" not in text:
        return text
    rest = text.partition("<think>")[2]
    return rest.partition("</think>")[2] if "</think>" in rest else rest


def tokens(messages: list[dict]) -> int:
    return sum(len(m["content"]) // 4 + 4 for m in messages)


# ---------------------------------------------------------------------------------------------
# parser, truncation, tmux


def op_parse(req: dict) -> list[dict]:
    parser = load_parser(req["variant"])
    out = []
    for text in req["texts"]:
        r = parser.parse_response(text)
        out.append(
            {"commands": [[c.keystrokes, c.duration] for c in r.commands], "complete": r.is_task_complete,
             "truthy": bool(r.is_task_complete), "error": r.error, "warning": r.warning}
        )  # fmt: skip
    return out


def op_limit(req: dict) -> list[str]:
    limit = agent_class(req["variant"])._limit_output_length
    return [limit(None, t, req.get("max_bytes", 10000)) for t in req["texts"]]


def op_incremental(req: dict) -> list[str]:
    session = _bare_session(req["variant"], [])
    captures = iter(req["captures"])
    state = {}

    def capture(capture_entire: bool = False) -> str:
        if capture_entire:
            state["now"] = next(captures)
            return state["now"][0]
        return state["now"][1]

    if req["variant"] == "harbor":

        async def acapture(capture_entire: bool = False) -> str:
            return capture(capture_entire)

        session.capture_pane = acapture
        return [asyncio.run(session.get_incremental_output()) for _ in req["captures"]]
    session.capture_pane = capture
    return [session.get_incremental_output() for _ in req["captures"]]


def _bare_session(variant: str, log: list):
    """Their TmuxSession with its environment replaced by a recorder (nothing is executed)."""
    if variant == "harbor":
        from harbor.agents.terminus_2.tmux_session import TmuxSession
        from harbor.environments.base import ExecResult

        class Recorder:
            session_id = "conformance"

            async def exec(self, command, user=None, timeout_sec=None, **kw):
                log.append(command)
                return ExecResult(stdout="", stderr="", return_code=0)

        return TmuxSession("terminus-2", Recorder(), Path("/logs/agent/terminus_2.pane"), None, None)
    from terminal_bench.terminal.tmux_session import TmuxSession

    class Container:
        def exec_run(self, cmd, user=""):
            log.append(list(cmd))
            return type("R", (), {"exit_code": 0, "output": b""})()

    session = TmuxSession.__new__(TmuxSession)
    session.container, session._session_name, session._user = Container(), "agent", ""
    session._commands_path, session._previous_buffer = None, None
    session._logger = __import__("logging").getLogger("tb")
    return session


def op_tmux_real(req: dict) -> dict:
    """Their session on this machine's tmux (a private server under req["tmux_tmpdir"]): start it,
    type each step's keys, wait, and collect the incremental outputs and the pane's history limit."""
    import subprocess
    import time

    env = {**os.environ, "TMUX_TMPDIR": req["tmux_tmpdir"]}
    cwd = req["workdir"]

    def run(cmd):
        argv = cmd if isinstance(cmd, list) else ["bash", "-c", cmd]
        return subprocess.run(argv, cwd=cwd, env=env, capture_output=True)

    if req["variant"] == "harbor":
        from harbor.agents.terminus_2.tmux_session import TmuxSession
        from harbor.environments.base import ExecResult

        class Local:
            session_id = "local"

            async def exec(self, command, user=None, timeout_sec=None, **kw):
                p = run(command)
                return ExecResult(stdout=p.stdout.decode(errors="replace"), stderr=p.stderr.decode(errors="replace"),
                                  return_code=p.returncode)  # fmt: skip

        session = TmuxSession("terminus-2", Local(), Path(cwd) / "pane.log", None, None)

        async def noop():
            return None

        session._attempt_tmux_installation = noop
        asyncio.run(session.start())
        call = asyncio.run
    else:
        from terminal_bench.terminal.tmux_session import TmuxSession

        class Container:
            def exec_run(self, cmd, user=""):
                p = run(list(cmd))
                return type("R", (), {"exit_code": p.returncode, "output": p.stdout + p.stderr})()

        TmuxSession.logging_path = property(lambda self: Path(cwd) / "pane.log")  # not /logs on this machine
        session = TmuxSession.__new__(TmuxSession)
        session.container, session._session_name, session._user = Container(), "agent", ""
        session._commands_path, session._previous_buffer, session._disable_recording = None, None, True
        session._logger = __import__("logging").getLogger("tb")
        session.start()

        def call(x):
            return x

    time.sleep(req.get("settle", 1.0))
    outputs = [call(session.get_incremental_output())]
    for keys, wait in req["steps"]:
        call(session.send_keys(keys, block=False, min_timeout_sec=wait))
        outputs.append(call(session.get_incremental_output()))
    name = "terminus-2" if req["variant"] == "harbor" else "agent"
    limit = run(["tmux", "display-message", "-p", "-t", name, "#{history_limit}"]).stdout.decode().strip()
    run(["tmux", "kill-server"])
    return {"outputs": outputs, "history_limit": limit}


def op_keys(req: dict) -> list[list]:
    """Per payload: the tmux operations their session runs, as [["argv", [...]] | ["paste", text]]."""
    out = []
    for payload in req["payloads"]:
        log: list = []
        session = _bare_session(req["variant"], log)
        if req["variant"] == "harbor":
            asyncio.run(session.send_keys(payload, block=False, min_timeout_sec=0.0))
        else:
            session.send_keys(payload, block=False, min_timeout_sec=0.0)
        out.append(_operations(log))
    return out


def _operations(log: list) -> list:
    """Shell command strings become argv lists; a staged paste becomes ["paste", payload]."""
    ops, chunks = [], []
    for cmd in log:
        if isinstance(cmd, list):
            ops.append(["argv", cmd])
        elif cmd.startswith("printf %s "):
            chunks.append(shlex.split(cmd)[2])
        elif cmd.startswith("tmux load-buffer"):
            ops.append(["paste", base64.b64decode("".join(chunks)).decode("utf-8")])
            chunks = []
        elif not cmd.startswith("rm -f "):
            ops.append(["argv", shlex.split(cmd)])
    return ops


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


def op_incremental_many(req: dict) -> list[list[str]]:
    return [op_incremental({"variant": req["variant"], "captures": c}) for c in req["cases"]]


OPS = {"tmux_real": op_tmux_real, "parse": op_parse, "limit": op_limit, "incremental": op_incremental, "keys": op_keys, "loop": op_loop,
       "export": op_export, "incremental_many": op_incremental_many}  # fmt: skip


def main() -> None:
    import logging

    logging.disable(logging.CRITICAL)  # their loggers would write into our stdout protocol
    requests = json.load(sys.stdin)
    results = [OPS[r["op"]](r) for r in requests]
    sys.stdout.write(json.dumps(results))


if __name__ == "__main__":
    main()
