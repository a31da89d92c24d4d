"""The published Terminus-2's agent loop on a scripted model and terminal.

A program for the reference environment's interpreter (`.venv-harbor/bin/python`, Python >= 3.12,
`make refenv`): it imports only the standard library and the two reference packages (harbor 0.26.0,
terminal-bench 0.2.18), and is loaded by file path (export_template.py here; the conformance suite's
driver). Only the edges are scripted: the model (replies in order; a call whose history + prompt
reaches `limit` tokens overflows, as a server would refuse it; tokens = sum(len(content) // 4 + 4),
the same rule as the tests' scripted backend) and the tmux session (the incremental outputs and
screens it returns, and the keys sent). `incremental` runs their tmux diff on given captures.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import tempfile
from pathlib import Path

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


def incremental(req: dict) -> list[str]:
    session = bare_session(req["variant"], [])
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


def bare_session(variant: str, log: list):
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
            logs_dir=Path(logs),
            model_name="openai/conformance",
            max_turns=sc.get("max_episodes", 50),
            suppress_max_turns_warning=True,
            record_terminal_session=False,
            enable_summarize=sc.get("summarize", True),
            proactive_summarization_threshold=sc.get("threshold", 8000),
        )
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
