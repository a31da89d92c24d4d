"""The agent's conversation with the model: history, model calls, and context management.

As Terminus-2 keeps it (harbor 0.26.0 / terminal-bench 0.2.18, our code):
- history: the user turns sent and the model's answers, in order. What the model is shown of a
  past answer is `eval.history_thinking`: `keep` (the whole text, reasoning included, as in
  training) or `drop` (only what follows `</think>`, what a chat endpoint with a reasoning parser
  hands Terminus-2 and so what its history holds).
- a call whose history + prompt does not fit `context_length` is an overflow (a server refuses
  it); otherwise the answer may use what is left, up to `max_tokens`; an answer cut at that limit
  gets Terminus-2's "output too long" turn and the model is asked again (nothing runs).
- context (`eval.context: summarize`): before each episode, when the free tokens fall under the
  threshold, the history is summarised and the handoff replaces the pending turn; on overflow the
  newest exchanges are dropped (two messages at a time, the first kept) until 4,000 tokens are
  free, the history is summarised and the handoff is sent instead (harbor; terminal-bench sends it
  joined to the pending turn). A summary is three calls: a summary of the work (with the history),
  questions about it (fresh, with the task, the summary and the screen), their answers (with the
  history); the history then becomes [first turn, questions turn, questions]. Harbor falls back to a
  short summary, then to no summary, when one fails; terminal-bench gives up (the attempt ends).
  `eval.context: stop` ends the attempt at the first overflow instead.
Every call counts its tokens; summary calls are counted apart (`summary_calls`).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

from horizon.eval.agent.prompts import Template
from horizon.eval.models.backends import Backend, BackendError, Completion
from horizon.terminus import answer_view

UNWIND_TARGET = 4000  # free tokens an overflow unwinds to (both reference loops)
SCREEN_TAIL = 1000  # characters of the screen harbor's fallbacks quote


class Overflow(Exception):
    """The messages do not fit the context (the server would refuse them)."""


class SummaryFailed(Exception):
    """A summarisation call overflowed, was cut, or failed."""


class End(Exception):
    """The attempt ends here; `reason` is recorded as AgentResult.ended."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    summary_calls: int = 0
    summarizations: int = 0
    events: list[dict] = field(default_factory=list)
    cache: dict | None = None  # see count_cache


def count_cache(usage: Usage, comp: Completion, call: int) -> None:
    """The prompt cache's record of an attempt, from what the backend says about each call after the first.

    reused_tokens: prompt tokens served from the cache. hits: calls whose cache held the attempt's whole
    previous context (only the new turns were encoded); misses: calls whose did not (a rewritten history,
    a summary, reasoning dropped from the history, or an answer that re-encodes to other tokens: the
    longest common prefix was reused). The first call is left out: what it finds cached depends on which
    attempt ran before it, and the record stays reproducible. A backend that cannot tell hits from
    misses (HTTP) records reused_tokens only.
    """
    if comp.cached_tokens is None:
        return
    c = usage.cache = usage.cache or {"reused_tokens": 0}
    if comp.continued is not None:
        c.setdefault("hits", 0)
        c.setdefault("misses", 0)
    if call > 0:
        c["reused_tokens"] += comp.cached_tokens
        if comp.continued is not None:
            c["hits" if comp.continued else "misses"] += 1


def episode_seed(*parts) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:4], "little")


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}


def shown(messages: list[dict], thinking: str) -> list[dict]:
    """What the model is shown of `messages` under eval.history_thinking (keep | drop)."""
    if thinking == "keep":
        return messages
    return [assistant(answer_view(m["content"])) if m["role"] == "assistant" else m for m in messages]


class Chat:
    def __init__(
        self, backend: Backend, template: Template, cfg, seed: int, deadline: float, screen, wording
    ):
        self.backend, self.t, self.cfg, self.wording = backend, template, cfg, wording
        self.seed_of = lambda n: episode_seed(seed, n)
        self.deadline, self.screen = deadline, screen
        self.history: list[dict] = []
        self.log: list[dict] = []  # every main-conversation turn, in order (the transcript)
        self.usage = Usage()

    def tokens(self, messages: list[dict]) -> int:
        return self.backend.prompt_tokens(shown(messages, self.cfg.history_thinking))

    def call(self, messages: list[dict], summary: bool = False) -> Completion:
        """One model call; raises Overflow when the messages do not fit."""
        view = shown(messages, self.cfg.history_thinking)
        room = self.cfg.context_length - self.backend.prompt_tokens(view)
        if room <= 0:
            raise Overflow()
        comp = self.backend.complete(
            view,
            seed=self.seed_of(self.usage.calls),
            max_tokens=min(self.cfg.max_tokens, room),
            timeout=max(1.0, self.deadline - time.monotonic()),
        )
        u = self.usage
        count_cache(u, comp, u.calls)
        u.calls += 1
        u.summary_calls += summary
        u.prompt_tokens += comp.prompt_tokens
        u.completion_tokens += comp.completion_tokens
        if comp.finish_reason == "context_length":
            raise Overflow()
        return comp

    def _append(self, *messages: dict) -> None:
        self.history.extend(messages)
        self.log.extend(messages)

    # -- the main query of an episode (harbor/terminal-bench `_query_llm`) --------------------------

    def query(self, prompt: str, instruction: str) -> str:
        """The model's answer to `prompt` (raw text); the exchange is appended to the history.

        A cut answer asks again with the "too long" turn, nested in this query. terminal-bench
        retries a query that failed (three tries per level of that nesting, the innermost first);
        harbor recovers inside (a failure there never reaches this point)."""
        levels = [[prompt, 3]]  # [prompt of the level, tries left]
        while True:
            current = levels[-1][0]
            try:
                comp = self.call([*self.history, user(current)])
            except Overflow:
                if self.cfg.context != "summarize":
                    raise End("context_length") from None
                try:
                    return self._recover(current, instruction)
                except SummaryFailed as e:
                    self.usage.events.append({"summary_failed": str(e)})
                    while levels and levels[-1][1] <= 1:
                        levels.pop()
                    if not levels:
                        raise End("context_length") from None
                    levels[-1][1] -= 1
                    continue
            if comp.finish_reason != "length":
                self._append(user(current), assistant(comp.text))
                return comp.text
            levels.append([self._too_long(current, comp.text), 3])

    def _too_long(self, prompt: str, text: str) -> str:
        """The cut answer stays in the history; the next prompt is the "too long" turn."""
        _, warnings = self.wording.feedback(text)
        kind = "output_too_long_warnings" if warnings else "output_too_long"
        msg = self.t.render(kind, limit=self.cfg.max_tokens, warnings=warnings)
        self._append(user(prompt), assistant(text))
        if self.t.loop.repeat_length_error:
            self._append(user(msg))
        self.usage.events.append({"output_too_long": len(text)})
        return msg

    def _recover(self, prompt: str, instruction: str) -> str:
        """After an overflow: unwind, summarise, send the handoff (with harbor's fallbacks)."""
        self.usage.events.append({"overflow": len(self.history)})
        self.unwind()
        if not self.t.loop.overflow_fallbacks:  # terminal-bench: any failure propagates
            handoff = self.summarize(instruction)
            comp = self._send(self.t.render("overflow_prompt", handoff=handoff, prompt=prompt))
            return comp.text
        handoff = self._harbor_handoff(instruction)
        try:
            return self._send(self.t.render("overflow_prompt", handoff=handoff, prompt=prompt)).text
        except SummaryFailed as e:  # harbor answers for the model with text holding no JSON
            self.usage.events.append({"summary_failed": f"handoff not sent: {e}"})
            return ""

    def _send(self, prompt: str) -> Completion:
        try:
            comp = self.call([*self.history, user(prompt)])
        except (Overflow, BackendError) as e:
            raise SummaryFailed(f"the handoff did not fit or failed: {type(e).__name__}") from None
        if comp.finish_reason == "length":
            raise SummaryFailed("the answer to the handoff was cut")
        self._append(user(prompt), assistant(comp.text))
        return comp

    def _harbor_handoff(self, instruction: str) -> str:
        try:
            return self.summarize(instruction)
        except SummaryFailed as e:
            self.usage.events.append({"summary_failed": str(e)})
        screen = self.screen()[-SCREEN_TAIL:]
        try:
            request = self.t.render("short_summary_request", instruction=instruction, screen=screen)
            short = self._sub([user(request)])
            return self.t.render("short_handoff", instruction=instruction, summary=short)
        except SummaryFailed as e:
            self.usage.events.append({"summary_failed": f"short summary: {e}"})
        return self.t.render("fallback_handoff", instruction=instruction, screen=self.screen()[-SCREEN_TAIL:])

    def unwind(self, target: int = UNWIND_TARGET) -> None:
        """Drop the newest two messages at a time until `target` tokens are free (the first stays)."""
        while len(self.history) > 1 and self.cfg.context_length - self.tokens(self.history) < target:
            self.history = self.history[:-2]

    # -- summarisation ----------------------------------------------------------------------------

    def free(self) -> int:
        return self.cfg.context_length - self.tokens(self.history)

    def _sub(self, messages: list[dict]) -> str:
        """A summarisation call: the answer's content, or SummaryFailed."""
        try:
            comp = self.call(messages, summary=True)
        except (Overflow, BackendError) as e:
            raise SummaryFailed(f"a summary call did not fit or failed: {type(e).__name__}") from None
        if comp.finish_reason == "length":
            raise SummaryFailed("a summary answer was cut at the token limit")
        return answer_view(comp.text)

    def summarize(self, instruction: str) -> str:
        """Summary, questions, answers; the history is replaced; returns the handoff turn."""
        if not self.history:
            return instruction
        self.usage.summarizations += 1
        self.usage.events.append({"summarize": len(self.history)})
        t = self.t
        request = t.render("summary_request", instruction=instruction)
        summary = self._sub([*self.history, user(request)])
        if t.loop.summary_in_history:
            self.history += [user(request), assistant(summary)]
        screen = self.screen()
        ask = t.render("questions", instruction=instruction, summary=summary, screen=screen)
        questions = self._sub([user(ask)])
        answer_request = t.render("answers_request", questions=questions)
        if t.loop.summary_in_history:
            answers = self._sub([*self.history, user(answer_request)])
            self.history += [user(answer_request), assistant(answers)]
        else:
            answers = self._sub([*self.history, user(request), assistant(summary), user(answer_request)])
        self.history = [*self.history[:1], user(ask), assistant(questions)]
        self.usage.events.append({"summary": summary, "questions": questions, "answers": answers})
        return t.render("handoff", answers=answers)
