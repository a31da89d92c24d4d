"""FAKE model backends for the tests and bench: scripted answers through the real Backend protocol."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from horizon.eval.models.backends import Backend, Completion


class ScriptedBackend(Backend):
    """FAKE model: answers from a list (cycled) or a function of the conversation; nothing generates."""

    def __init__(self, answers: Sequence[str] | Callable[[Sequence[dict]], str]):
        self.answers = answers
        self.calls = 0

    def prompt_tokens(self, messages) -> int:
        return sum(len(m["content"]) // 4 + 4 for m in messages)

    def complete(self, messages, seed, max_tokens, timeout=None) -> Completion:
        if callable(self.answers):
            text = self.answers(messages)
        else:
            text = self.answers[self.calls % len(self.answers)]
        self.calls += 1
        return Completion(text, self.prompt_tokens(messages), len(text) // 4 + 1)
