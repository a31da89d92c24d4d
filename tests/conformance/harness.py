"""Our side of the conformance loops: the same scripted edges the reference driver uses.

FAKE model (`ScriptedModel`: replies in order, tokens = sum(len(content) // 4 + 4), as the driver
counts) and scripted terminal (`ScriptedTerminal`: outputs and screens in order, keys recorded,
scripted timeouts). Everything between them is our real loop (horizon.eval.agent.loop / conversation).
"""

from __future__ import annotations

import time

from horizon.eval.agent.loop import AgentConfig, _Loop
from horizon.eval.agent.prompts import Template
from horizon.eval.agent.terminal import TerminalTimeout
from horizon.eval.models.backends import Backend, BackendError, Completion


class Exhausted(Exception):
    """The script has no more replies."""


class ScriptedModel(Backend):
    """FAKE model for the conformance loops (a list of replies)."""

    def __init__(self, replies: list[dict]):
        self.replies = list(replies)
        self.calls: list[list[dict]] = []

    def prompt_tokens(self, messages) -> int:
        return sum(len(m["content"]) // 4 + 4 for m in messages)

    def complete(self, messages, seed, max_tokens, timeout=None) -> Completion:
        if not self.replies:
            raise Exhausted()
        self.calls.append([dict(m) for m in messages])
        r = self.replies.pop(0)
        if r.get("fail"):
            raise BackendError("scripted failure")
        if "length" in r:
            return Completion(r["length"], 0, 0, "length")
        return Completion(r["text"], 0, 0, "stop")


class ScriptedTerminal:
    def __init__(self, sc: dict):
        self.outputs, self.screens = list(sc["outputs"]), list(sc.get("screens") or ["$ "])
        self.timeouts, self.sends, self.keys = set(sc.get("timeouts", [])), 0, []

    def _next(self, items: list[str]) -> str:
        return items.pop(0) if len(items) > 1 else items[0]

    def start(self) -> str:
        return self.incremental()

    def incremental(self) -> str:
        return self._next(self.outputs)

    def screen(self) -> str:
        return self._next(self.screens)

    def run(self, keys: str, duration: float, deadline=None) -> None:
        self.keys.append([keys, duration])
        self.sends += 1
        if self.sends - 1 in self.timeouts:
            raise TerminalTimeout("scripted timeout")

    def alive(self) -> bool:
        return True


def run_ours(sc: dict, template: Template, context: str = "summarize") -> dict:
    """Our loop on the scenario: the calls made, the keys typed, how it ended, the result."""
    model, term = ScriptedModel(sc["replies"]), ScriptedTerminal(sc)
    cfg = AgentConfig(
        max_episodes=sc.get("max_episodes", 50), context_length=sc["limit"], max_tokens=sc["output_limit"],
        summarize_threshold=sc.get("threshold", 8000), context=context,
        history_thinking="drop" if sc.get("reasoning") else "keep",
    )  # fmt: skip
    loop = _Loop(term, model, template, cfg, 0, time.monotonic() + 600, [])
    end = "done"
    try:
        if loop.run(sc["instruction"], term.start()).ended not in ("completed", "max_episodes"):
            end = "error"
    except Exhausted:
        end = "exhausted"
    return {"calls": model.calls, "keys": term.keys, "end": end, "result": loop.res, "usage": loop.chat.usage}
