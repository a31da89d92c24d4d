"""The agent loop, as Terminus-2 runs it (harbor 0.26.0 / terminal-bench 0.2.18; our own code).

Per episode: (when the free context runs low, the history is summarised first: conversation.py) the model
answers; the answer is parsed (horizon.terminus, on what a reasoning parser would hand over);
- unusable: nothing runs, the next turn reports the error (and the warnings);
- otherwise every command's keystrokes go to tmux, each followed by a wait of min(duration, 60) s;
  the terminal output (cut to 10,000 bytes) is the next turn, cut once more when it is an
  observation (Terminus-2 cuts twice there, so a long output shows "71 interior bytes omitted"
  rather than the real count: kept, since it is what the model sees), headed by the warnings if any;
- `task_complete` (truthy) is answered with the confirmation question (showing the output, cut
  once, without warnings); a second one in a row ends the attempt after its commands ran. A parse
  error in between does not reset the confirmation (only an answer without task_complete does).
The attempt also ends at the agent timeout, when tmux is gone, when the context cannot be
recovered (or at the first overflow with eval.context: stop), and at eval.max_episodes or after
eval.max_consecutive_parse_errors unusable answers in a row when those caps are set (Terminus-2 has
neither). The tests run in every case. How it ended is `ended`; the record counts episodes, model
calls, parse errors and summarisations.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from itertools import count
from typing import NoReturn

from horizon.eval.agent.conversation import Chat, End, SummaryFailed, episode_seed
from horizon.eval.agent.prompts import Template
from horizon.eval.agent.terminal import MAX_WAIT, Terminal, TerminalLost, TerminalTimeout, limit_output
from horizon.eval.models.backends import Backend
from horizon.eval.sandbox import Sandbox, SandboxError
from horizon.terminus import Response, answer_view, parse

__all__ = ["AgentConfig", "AgentResult", "Wording", "episode_seed", "run_agent", "run_loop"]
log = logging.getLogger("horizon.eval.agent.loop")


def _eval_default(*keys: str):
    """A default of config `eval:` from the schema (the only home of defaults; they are Terminus-2's)."""
    from horizon.config import schema_property

    return field(default_factory=lambda: schema_property("eval", *keys)["default"])


@dataclass
class AgentConfig:
    """The loop's limits: from the rollout's eval settings (horizon.eval.rollout.agent_config); a field
    left out takes the schema's eval default (the scripted teacher, the conformance suite)."""

    max_episodes: int | None = _eval_default("max_episodes")  # None: no cap (Terminus-2's is 1,000,000)
    context_length: int = _eval_default("context_length")
    max_tokens: int = _eval_default("sampling", "max_tokens")
    max_consecutive_parse_errors: int | None = _eval_default("max_consecutive_parse_errors")  # None: no cap
    output_cap: int = (
        10_000  # UTF-8 bytes of a terminal output the model sees (Terminus-2's; not a config key)
    )
    agent_timeout: float | None = _eval_default("agent_timeout_s")  # overrides the task's
    context: str = _eval_default("context")  # summarize | stop
    summarize_threshold: int = _eval_default("summarize_threshold")  # free tokens that trigger a summary
    history_thinking: str = _eval_default("history_thinking")  # keep | drop (see conversation.py)
    capture: str = _eval_default("capture")  # timed (Terminus-2) | idle (see terminal.py)
    capture_idle_max_s: float = _eval_default("capture_idle_max_s")


@dataclass
class AgentResult:
    messages: list[dict]
    episodes: int
    ended: str  # completed | agent_timeout | context_length | parse_exhausted | max_episodes | terminal_lost
    #              | sandbox_exhausted | sandbox_killed
    prompt_tokens: int = 0
    completion_tokens: int = 0
    first_complete_episode: int | None = None
    error_signatures: list[dict] = field(default_factory=list)
    parse_errors: int = 0
    seconds: float = 0.0
    events: list[dict] = field(default_factory=list)
    model_calls: int = 0
    summary_calls: int = 0
    summarizations: int = 0
    evidence: str | None = None  # why the sandbox or terminal failed, when it did
    cache: dict | None = None  # the prompt cache's record (chat.count_cache)


def scan_signatures(text: str, patterns: list[re.Pattern], episode: int) -> list[dict]:
    return [{"pattern": p.pattern, "episode": episode} for p in patterns if p.search(text)]


class Wording:
    """How the verdict on an answer is worded: in Terminus-2's words when the template comes from the
    reference package (their parser, loaded by path), else in ours. Our parser decides either way."""

    def __init__(self, template: Template):
        from horizon.eval.reference.environment import ReferenceParser

        self.variant = template.loop.variant
        self.ref = ReferenceParser(template.parser_module) if template.parser_module else None

    def verdict(self, raw: str) -> tuple[Response, str, str, dict | None]:
        """(parsed answer, error text, warnings text, disagreement or None)."""
        r = parse(raw, self.variant)
        own_error = str(r.error) if r.error else ""
        own_warnings = "- " + "\n- ".join(map(str, r.warnings)) if r.warnings else ""
        if self.ref is None:
            return r, own_error, own_warnings, None
        error, warnings, has_error, complete = self.ref.feedback(answer_view(raw))
        if has_error != (r.error is not None) or (not has_error and complete != r.task_complete):
            return r, own_error, own_warnings, {"ours": own_error or "ok", "theirs": error or "ok"}
        return r, error, warnings, None

    def feedback(self, raw: str) -> tuple[str, str]:
        return self.verdict(raw)[1:3]


class _Loop:
    """One attempt's episodes: ask (conversation.py), act in tmux, build the next user turn."""

    def __init__(self, terminal, backend, template: Template, cfg: AgentConfig, seed, deadline, patterns):
        self.term, self.t, self.cfg = terminal, template, cfg
        self.deadline, self.patterns = deadline, patterns
        self.wording = Wording(template)
        self.chat = Chat(backend, template, cfg, seed, deadline, terminal.screen, self.wording)
        self.res = AgentResult(messages=self.chat.log, episodes=0, ended="max_episodes")
        self.chat.usage.events = self.res.events  # one chronological list
        self.pending = False
        self.errors_in_row = 0

    def limit(self, text: str) -> str:
        return limit_output(text, self.cfg.output_cap, self.t.turns["truncation"])

    def proactive(self, prompt: str, instruction: str) -> str:
        """The handoff instead of `prompt` when the free context is under the threshold."""
        if self.cfg.context != "summarize" or self.chat.free() >= self.cfg.summarize_threshold:
            return prompt
        try:
            return self.chat.summarize(instruction)
        except SummaryFailed as e:
            self.chat.usage.events.append({"summary_failed": f"proactive: {e}"})
            if not self.t.loop.overflow_fallbacks:  # terminal-bench: the agent stops
                raise End("context_length") from None
            return prompt  # harbor: logged, the pending turn is sent as it was

    def act(self, episode: int, commands) -> str:
        """Run the commands; the terminal output (cut once), or the timeout turn."""
        for cmd in commands:
            if time.monotonic() >= self.deadline:
                break
            seconds = min(cmd.duration, MAX_WAIT)
            try:
                self.term.run(cmd.keystrokes, seconds, self.deadline)
            except TerminalTimeout:
                screen = self.limit(self.term.incremental())
                return self.t.render("timeout", command=cmd.keystrokes, timeout_sec=seconds, screen=screen)
            except (TerminalLost, SandboxError) as e:
                self.fault(episode, e)
        try:
            return self.limit(self.term.incremental())
        except (TerminalLost, SandboxError) as e:
            self.fault(episode, e)

    def fault(self, episode: int, e: Exception) -> NoReturn:
        """The terminal or the sandbox failed under the agent: whose doing, from the sandbox's evidence.

        The agent's own doing (its limits hit, its sandbox ended from inside, its tmux killed in a healthy
        sandbox) ends the attempt as its failure; anything else is raised as an infrastructure error."""
        sb = getattr(self.term, "sb", None)
        if sb is None:  # a scripted terminal (tests): no sandbox to ask
            ended, evidence = (
                ("terminal_lost" if isinstance(e, TerminalLost) else "sandbox_exhausted"),
                str(e),
            )
        else:
            d = sb.diagnose()
            if d.agents_doing:  # its limits hit (a fork bomb), or ended from inside
                ended, evidence = d.failure_mode, f"{e}; {d.evidence}"
            elif d.state == "healthy" and isinstance(e, TerminalLost):  # the agent killed its tmux
                ended, evidence = "terminal_lost", f"{e}; {d.evidence}"
            else:  # gone for reasons outside it, or a call of ours failing in a healthy sandbox
                raise SandboxError(f"{sb.spec.name}: {e}", evidence=f"{d.state}: {d.evidence}") from None
        self.res.evidence = evidence
        self.res.events.append({"episode": episode, ended: evidence})
        raise End(ended) from None

    def episode(self, episode: int, prompt: str, instruction: str) -> str | None:
        """One episode; the next prompt, or None when the attempt is complete."""
        prompt = self.proactive(prompt, instruction)
        raw = self.chat.query(prompt, instruction)
        self.res.episodes += 1
        answer, error, warnings, disagreement = self.wording.verdict(raw)
        if disagreement:
            self.res.events.append({"episode": episode, "parser_disagreement": disagreement})
        if answer.error is not None:
            return self.unusable(episode, error, warnings)
        self.errors_in_row = 0
        output = self.act(episode, answer.commands)
        self.res.error_signatures += scan_signatures(output, self.patterns, episode)
        self.res.events.append(
            {"episode": episode, "commands": len(answer.commands), "task_complete": answer.task_complete}
        )
        if answer.task_complete:
            if self.res.first_complete_episode is None:
                self.res.first_complete_episode = episode
            if self.pending:
                return None
            self.pending = True
            return self.t.render("confirm", output=output)
        self.pending = False
        if warnings:
            return self.t.render("warnings", warnings=warnings, output=self.limit(output))
        return self.t.render("observation", output=self.limit(output))

    def unusable(self, episode: int, error: str, warnings: str) -> str:
        self.res.parse_errors += 1
        self.errors_in_row += 1
        self.res.events.append({"episode": episode, "parse_error": error})
        cap = self.cfg.max_consecutive_parse_errors
        if cap is not None and self.errors_in_row >= cap:
            raise End("parse_exhausted")
        if warnings:
            return self.t.render("parse_error_warnings", error=error, warnings=warnings)
        return self.t.render("parse_error", error=error)

    def run(self, instruction: str, first_screen: str) -> AgentResult:
        prompt = self.t.first(instruction, self.limit(first_screen))
        caps = count() if self.cfg.max_episodes is None else range(self.cfg.max_episodes)
        try:
            for episode in caps:
                if time.monotonic() >= self.deadline:
                    raise End("agent_timeout")
                if not self.term.alive():  # whose doing, from the sandbox's evidence (its storage, ...)
                    self.fault(episode, TerminalLost("the terminal is gone"))
                prompt = self.episode(episode, prompt, instruction)
                if prompt is None:
                    raise End("completed")
            raise End("max_episodes")
        except End as e:
            self.res.ended = e.reason
        if self.res.ended == "max_episodes" and time.monotonic() >= self.deadline:
            self.res.ended = "agent_timeout"
        u = self.chat.usage
        self.res.prompt_tokens, self.res.completion_tokens = u.prompt_tokens, u.completion_tokens
        self.res.model_calls, self.res.summary_calls, self.res.summarizations = (
            u.calls,
            u.summary_calls,
            u.summarizations,
        )
        self.res.cache = u.cache
        return self.res


def run_loop(
    terminal,
    backend: Backend,
    template: Template,
    instruction: str,
    deadline: float,
    cfg: AgentConfig,
    seed: int,
    signatures=(),
) -> AgentResult:
    """The loop on a terminal (anything with start/run/incremental/screen/alive; started here)."""
    start = time.monotonic()
    loop = _Loop(terminal, backend, template, cfg, seed, deadline, [re.compile(s) for s in signatures])
    res = loop.run(instruction, terminal.start())
    res.seconds = time.monotonic() - start
    return res


NO_DEADLINE = 10 * 365 * 86400.0


def agent_deadline(cfg: AgentConfig, task_timeout: float | None) -> float:
    """When the attempt's agent time ends (time.monotonic): eval.agent_timeout_s over the task's own; with
    neither (a Harbor task without agent.timeout_sec) a deadline no attempt reaches. Wall-clock time, the
    model's included, as Terminus-2 counts it."""
    return time.monotonic() + (cfg.agent_timeout or task_timeout or NO_DEADLINE)


def run_agent(
    sandbox: Sandbox,
    backend: Backend,
    template: Template,
    instruction: str,
    timeout: float | None,
    cfg: AgentConfig,
    seed: int,
    signatures: list[str] = (),
) -> AgentResult:
    deadline = agent_deadline(cfg, timeout)
    terminal = Terminal(
        sandbox,
        template.turns["terminal_screen"],
        template.turns["terminal_new"],
        style=template.loop.variant,
        settle=cfg.capture_idle_max_s if cfg.capture == "idle" else None,
    )
    return run_loop(terminal, backend, template, instruction, deadline, cfg, seed, signatures)
