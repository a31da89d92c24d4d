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

from horizon.llm import Backend
from horizon.prompts import Template
from horizon.sandbox import Sandbox, SandboxError
from horizon.terminal import Terminal, TerminalLost
from horizon.terminus import ParseError, parse_response

log = logging.getLogger("horizon.agent")


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


def episode_seed(*parts) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:4], "little")


def scan_signatures(text: str, patterns: list[re.Pattern], episode: int) -> list[dict]:
    return [{"pattern": p.pattern, "episode": episode} for p in patterns if p.search(text)]


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
    patterns = [re.compile(s) for s in signatures]
    term = Terminal(sandbox)
    screen = term.start()
    messages = [{"role": "user", "content": template.first(instruction, screen)}]
    res = AgentResult(messages=messages, episodes=0, ended="max_episodes")
    pending_confirm = False
    consecutive_errors = 0
    for episode in range(cfg.max_episodes):
        if time.monotonic() >= deadline:
            res.ended = "agent_timeout"
            break
        n_prompt = backend.prompt_tokens(messages)
        room = cfg.context_length - n_prompt
        if room < min(256, cfg.max_tokens):
            res.ended = "context_length"
            break
        comp = backend.complete(
            messages,
            seed=episode_seed(seed, episode),
            max_tokens=min(cfg.max_tokens, room),
            timeout=max(1.0, deadline - time.monotonic()),
        )
        res.episodes += 1
        res.prompt_tokens += comp.prompt_tokens
        res.completion_tokens += comp.completion_tokens
        if comp.finish_reason == "context_length":
            res.ended = "context_length"
            break
        messages.append({"role": "assistant", "content": comp.text})
        try:
            answer = parse_response(comp.text)
        except ParseError as e:
            res.parse_errors += 1
            consecutive_errors += 1
            res.events.append({"episode": episode, "parse_error": str(e)})
            if consecutive_errors >= cfg.max_consecutive_parse_errors:
                res.ended = "parse_exhausted"
                break
            pending_confirm = False
            messages.append({"role": "user", "content": template.after("parse_error", error=f"ERROR: {e}")})
            continue
        consecutive_errors = 0
        try:
            for cmd in answer.commands:
                if time.monotonic() >= deadline:
                    break
                term.run(cmd.keystrokes, cmd.duration, deadline)
            output = term.new_output(cfg.output_cap)
        except TerminalLost as e:
            res.events.append({"episode": episode, "terminal_lost": str(e)})
            res.ended = "terminal_lost"
            break
        except SandboxError as e:
            if not sandbox.alive():
                raise  # the sandbox died under us: an infrastructure error
            # up, but unable to run anything (e.g. a fork bomb holds every process slot): the agent's doing
            res.events.append({"episode": episode, "sandbox_exhausted": str(e)})
            res.ended = "sandbox_exhausted"
            break
        res.error_signatures += scan_signatures(output, patterns, episode)
        res.events.append(
            {"episode": episode, "commands": len(answer.commands), "task_complete": answer.task_complete}
        )
        if answer.task_complete:
            if res.first_complete_episode is None:
                res.first_complete_episode = episode
            if pending_confirm:
                res.ended = "completed"
                break
            pending_confirm = True
            messages.append(
                {"role": "user", "content": template.after("confirm", answer.warnings, output=output)}
            )
        else:
            pending_confirm = False
            messages.append(
                {"role": "user", "content": template.after("observation", answer.warnings, output=output)}
            )
    else:
        res.ended = "max_episodes"
    if res.ended == "max_episodes" and time.monotonic() >= deadline:
        res.ended = "agent_timeout"
    res.seconds = time.monotonic() - start
    return res
