"""The agent loop, Terminus-2 compatible: one model call per episode, keystrokes into tmux.

Per episode: the model answers (reasoning, then one JSON object); the answer is parsed (first
balanced object after `</think>`); a parse error runs nothing and the next user turn reports it;
otherwise each command's keystrokes are typed into the sandbox's tmux and the loop waits
min(duration, 60) s; the next user turn holds the new terminal output (capped at 10,000 bytes).
`task_complete: true` is answered with a confirmation question, and a second `task_complete: true`
in a row ends the attempt. The attempt also ends at the task's agent timeout, when the next prompt
would not fit the context, after too many unparseable answers in a row, or at max_episodes; the
tests run in every case. How it ended is recorded (`ended`), and why it failed (`failure_mode`).
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from dataclasses import dataclass, field

from horizon.eval.llm import Backend
from horizon.eval.prompts import Template
from horizon.eval.sandbox import Sandbox, SandboxError
from horizon.eval.terminal import Terminal, TerminalLost
from horizon.terminus import ParseError, parse_response

log = logging.getLogger("horizon.eval.agent")


@dataclass
class AgentConfig:
    max_episodes: int = 50
    context_length: int = 32768
    max_tokens: int = 8192
    max_consecutive_parse_errors: int = 10
    output_cap: int = 10_000
    agent_timeout: float | None = None  # overrides the task's


@dataclass
class AgentResult:
    messages: list[dict]
    episodes: int
    ended: str  # completed | agent_timeout | context_length | parse_exhausted | max_episodes | terminal_lost
    #              | sandbox_exhausted
    prompt_tokens: int = 0
    completion_tokens: int = 0
    first_complete_episode: int | None = None
    error_signatures: list[dict] = field(default_factory=list)
    parse_errors: int = 0
    seconds: float = 0.0
    events: list[dict] = field(default_factory=list)
    cache: dict | None = None  # see count_cache


def count_cache(res: AgentResult, comp, episode: int) -> None:
    """The prompt cache's record of an attempt, from what the backend says about each call after the first.

    reused_tokens: prompt tokens served from the cache. hits: calls whose cache held the attempt's whole
    previous context (only the new turns were encoded); misses: calls whose did not (a rewritten history or
    an answer that re-encodes to other tokens: the longest common prefix was reused). The first call is left
    out: what it finds cached depends on which attempt ran before it, and the record stays reproducible. A
    backend that cannot tell hits from misses (HTTP) records reused_tokens only.
    """
    if comp.cached_tokens is None:
        return
    c = res.cache = res.cache or {"reused_tokens": 0}
    if comp.continued is not None:
        c.setdefault("hits", 0)
        c.setdefault("misses", 0)
    if episode > 0:
        c["reused_tokens"] += comp.cached_tokens
        if comp.continued is not None:
            c["hits" if comp.continued else "misses"] += 1


def episode_seed(*parts) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:4], "little")


def scan_signatures(text: str, patterns: list[re.Pattern], episode: int) -> list[dict]:
    return [{"pattern": p.pattern, "episode": episode} for p in patterns if p.search(text)]


class _Loop:
    """One attempt's conversation: ask the model, act on its answer, build the next user turn."""

    def __init__(self, sandbox, backend, template, cfg: AgentConfig, seed: int, deadline: float, patterns):
        self.sandbox, self.backend, self.template, self.cfg = sandbox, backend, template, cfg
        self.seed, self.deadline, self.patterns = seed, deadline, patterns
        self.term = Terminal(sandbox)
        self.pending_confirm = False
        self.consecutive_errors = 0

    def ask(self, res: AgentResult, episode: int) -> str | None:
        """The model's answer, or None when the attempt ends here (res.ended set)."""
        room = self.cfg.context_length - self.backend.prompt_tokens(res.messages)
        if room < min(256, self.cfg.max_tokens):
            res.ended = "context_length"
            return None
        comp = self.backend.complete(
            res.messages,
            seed=episode_seed(self.seed, episode),
            max_tokens=min(self.cfg.max_tokens, room),
            timeout=max(1.0, self.deadline - time.monotonic()),
        )
        res.episodes += 1
        res.prompt_tokens += comp.prompt_tokens
        res.completion_tokens += comp.completion_tokens
        count_cache(res, comp, episode)
        if comp.finish_reason == "context_length":
            res.ended = "context_length"
            return None
        res.messages.append({"role": "assistant", "content": comp.text})
        return comp.text

    def parse_error(self, res: AgentResult, episode: int, e: ParseError) -> bool:
        """Record an unparseable answer; False when the attempt ends here."""
        res.parse_errors += 1
        self.consecutive_errors += 1
        res.events.append({"episode": episode, "parse_error": str(e)})
        if self.consecutive_errors >= self.cfg.max_consecutive_parse_errors:
            res.ended = "parse_exhausted"
            return False
        self.pending_confirm = False
        res.messages.append(
            {"role": "user", "content": self.template.after("parse_error", error=f"ERROR: {e}")}
        )
        return True

    def act(self, res: AgentResult, episode: int, answer) -> str | None:
        """Type the answer's keystrokes; the new terminal output, or None when the attempt ends here."""
        try:
            for cmd in answer.commands:
                if time.monotonic() >= self.deadline:
                    break
                self.term.run(cmd.keystrokes, cmd.duration, self.deadline)
            return self.term.new_output(self.cfg.output_cap)
        except TerminalLost as e:
            res.events.append({"episode": episode, "terminal_lost": str(e)})
            res.ended = "terminal_lost"
        except SandboxError as e:
            if not self.sandbox.alive():
                raise  # the sandbox died under us: an infrastructure error
            # up, but unable to run anything (e.g. a fork bomb holds every process slot): the agent's doing
            res.events.append({"episode": episode, "sandbox_exhausted": str(e)})
            res.ended = "sandbox_exhausted"
        return None

    def observe(self, res: AgentResult, episode: int, answer, output: str) -> bool:
        """The next user turn; False when the answer confirmed completion (the attempt ends)."""
        res.error_signatures += scan_signatures(output, self.patterns, episode)
        res.events.append(
            {"episode": episode, "commands": len(answer.commands), "task_complete": answer.task_complete}
        )
        if not answer.task_complete:
            self.pending_confirm = False
            res.messages.append(
                {
                    "role": "user",
                    "content": self.template.after("observation", answer.warnings, output=output),
                }
            )
            return True
        if res.first_complete_episode is None:
            res.first_complete_episode = episode
        if self.pending_confirm:
            res.ended = "completed"
            return False
        self.pending_confirm = True
        res.messages.append(
            {"role": "user", "content": self.template.after("confirm", answer.warnings, output=output)}
        )
        return True

    def episode(self, res: AgentResult, episode: int) -> bool:
        """One episode; False when the attempt ends."""
        text = self.ask(res, episode)
        if text is None:
            return False
        try:
            answer = parse_response(text)
        except ParseError as e:
            return self.parse_error(res, episode, e)
        self.consecutive_errors = 0
        output = self.act(res, episode, answer)
        return output is not None and self.observe(res, episode, answer, output)


def run_agent(
    sandbox: Sandbox,
    backend: Backend,
    template: Template,
    instruction: str,
    timeout: float,
    cfg: AgentConfig,
    seed: int,
    signatures: list[str] = (),
) -> AgentResult:
    start = time.monotonic()
    deadline = start + (cfg.agent_timeout or timeout)
    loop = _Loop(sandbox, backend, template, cfg, seed, deadline, [re.compile(s) for s in signatures])
    screen = loop.term.start()
    res = AgentResult(messages=[{"role": "user", "content": template.first(instruction, screen)}], episodes=0,
                      ended="max_episodes")  # fmt: skip
    for episode in range(cfg.max_episodes):
        if time.monotonic() >= deadline:
            res.ended = "agent_timeout"
            break
        if not loop.episode(res, episode):
            break
    else:
        res.ended = "max_episodes"
    if res.ended == "max_episodes" and time.monotonic() >= deadline:
        res.ended = "agent_timeout"
    res.seconds = time.monotonic() - start
    return res
