"""Prompt templates of the harness: every user turn the agent loop can send, by kind.

A template is a YAML file (`format: 2`) with one text per turn kind; `{name}` placeholders are
filled in one pass (other braces are left alone, so JSON examples need no escaping):

  initial                 first user turn: {instruction}, {screen} (the terminal state)
  terminal_screen         how the terminal shows the visible screen: {screen}
  terminal_new            how the terminal shows new output: {output}
  truncation              the line between head and tail of cut output: {limit}, {omitted}
  observation             after commands ran: {output}
  warnings                after commands ran, when the answer had warnings: {warnings}, {output}
  parse_error             after an unusable answer: {error}
  parse_error_warnings    the same with warnings: {error}, {warnings}
  confirm                 after the first task_complete: {output}
  timeout                 terminal state after a command timed out: {command}, {timeout_sec}, {screen}
  output_too_long         after an answer cut at the token limit: {limit}
  output_too_long_warnings   the same with the cut answer's warnings: {limit}, {warnings}
  summary_request, questions, answers_request, handoff    context summarisation (see loop.py):
                          {instruction}; {instruction} {summary} {screen}; {questions}; {answers}
  overflow_prompt         what is sent after an overflow: {handoff} (and {prompt})
  short_summary_request, short_handoff, fallback_handoff  Harbor's fallbacks when a summary fails

and `loop:` (how the loop behaves where the two Terminus-2 releases differ; see LoopStyle).
Kinds a file leaves out get generic wording written for this project (GENERIC).

Where a template comes from (eval.prompt_template): a file (the demo's demo/prompt.yaml);
`terminus-2-harbor` / `terminus-2-tb1`, exported from the installed reference packages at run time
(horizon.eval.reference.environment); or null, extracted from the corpus (horizon.eval.agent.extract), so that
evaluation prompts match the training data, with the kinds the corpus never shows taken from the
reference package when it is installed.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

FORMAT = 2
PLACEHOLDERS = {
    "initial": ("instruction", "screen"),
    "terminal_screen": ("screen",),
    "terminal_new": ("output",),
    "truncation": ("omitted",),
    "observation": ("output",),
    "warnings": ("warnings", "output"),
    "parse_error": ("error",),
    "parse_error_warnings": ("error", "warnings"),
    "confirm": ("output",),
    "timeout": ("command", "screen"),
    "output_too_long": (),
    "output_too_long_warnings": ("warnings",),
    "summary_request": (),
    "questions": ("summary",),
    "answers_request": ("questions",),
    "handoff": ("answers",),
    "overflow_prompt": ("handoff",),
    "short_summary_request": (),
    "short_handoff": ("summary",),
    "fallback_handoff": (),
}
KINDS = tuple(PLACEHOLDERS)

# Our own wording, for the kinds a template leaves out (written for this project).
GENERIC = {
    "terminal_screen": "Screen now:\n{screen}",
    "terminal_new": "New output:\n{output}",
    "truncation": "\n[... {omitted} bytes cut here: output is shown up to {limit} bytes ...]\n",
    "observation": "{output}",
    "warnings": "Your last answer had problems that were worked around:\n{warnings}\n\n{output}",
    "parse_error": "Your last answer could not be used:\n{error}\n\nAnswer again with one valid JSON object.",
    "parse_error_warnings": "Your last answer could not be used:\n{error}\nAlso:\n{warnings}\n\n"
    "Answer again with one valid JSON object.",
    "confirm": "Terminal:\n{output}\n\nShould I mark the task as complete? The tests run next and nothing can "
    "be changed after that. To confirm, answer with task_complete true once more.",
    "timeout": "The command\n{command}\ndid not finish within {timeout_sec} s. Terminal:\n{screen}",
    "output_too_long": "Nothing was run: your answer went past the limit of {limit} tokens and was cut off. "
    "Keep answers under {limit} tokens and split long work into several steps.",
    "output_too_long_warnings": "Nothing was run: your answer went past the limit of {limit} tokens and was "
    "cut off. Keep answers under {limit} tokens and split long work into several steps.\n\n"
    "What the parser saw in the cut-off answer:\n{warnings}",
    "summary_request": "Another agent will take over this task from you. The task:\n{instruction}\n\n"
    "Write down what you did and what it showed, what you found out (files, settings, errors), which "
    "problems you solved and how, and exactly where the work stands now.",
    "questions": "You take over a task from another agent.\n\nThe task:\n{instruction}\n\nTheir summary:\n"
    "{summary}\n\nThe screen now:\n{screen}\n\nAsk them at least five questions about anything the "
    "summary leaves open; after that you work on your own.",
    "answers_request": "The agent taking over asks these questions; answer each one in detail:\n\n{questions}",
    "handoff": "The previous agent answered:\n\n{answers}\n\nGo on with the task from where it stands; no more "
    "questions. Answer in the usual JSON format.",
    "overflow_prompt": "{handoff}",
    "short_summary_request": "The task: {instruction}\n\nThe screen: {screen}\n\nIn two or three sentences, "
    "what should happen next?",
    "short_handoff": "{instruction}\n\nNotes so far: {summary}",
    "fallback_handoff": "{instruction}\n\nThe screen: {screen}",
}


@dataclass(frozen=True)
class LoopStyle:
    """Where the two published Terminus-2 loops differ (harbor 0.26.0 vs terminal-bench 0.2.18)."""

    variant: str = "harbor"  # parser (one warning) and keystroke delivery
    summary_in_history: bool = False  # tb1: the summary request and answer stay in the chat history
    repeat_length_error: bool = False  # tb1: a too-long answer's error turn is sent twice in a row
    overflow_fallbacks: bool = True  # harbor: a failed summary on overflow falls back to shorter ones


def fill(text: str, **values) -> str:
    """Replace {name} for the given names in one pass (a value holding "{x}" is left as it is)."""
    return re.sub(r"\{(\w+)\}", lambda m: str(values[m[1]]) if m[1] in values else m[0], text)


@dataclass
class Template:
    turns: dict[str, str]
    loop: LoopStyle = field(default_factory=LoopStyle)
    source: str = "file"
    parser_module: str | None = None  # the reference parser that words the feedback, if any
    sources: dict[str, str] = field(default_factory=dict)  # kind -> where its wording came from

    def render(self, kind: str, **values) -> str:
        return fill(self.turns[kind], **values)

    def first(self, instruction: str, screen: str) -> str:
        return self.render("initial", instruction=instruction, screen=screen)

    @classmethod
    def from_dict(cls, data: dict, origin: str = "template") -> Template:
        if data.get("format") not in (None, FORMAT) or ("format" not in data and "source" not in data):
            raise ValueError(
                f"{origin}: not a format-{FORMAT} prompt template (`format: {FORMAT}` missing). Templates "
                "written before the Terminus-2 loop (keys initial/observation/confirm/parse_error only) "
                "must be regenerated (delete the file and rerun) or rewritten (see horizon/eval/agent/prompts.py)"
            )
        unknown = sorted(set(data) - set(KINDS) - {"format", "source", "loop", "parser_module", "sources"})
        if unknown:
            raise ValueError(f"{origin}: unknown key(s) {', '.join(unknown)} (kinds: {', '.join(KINDS)})")
        if not isinstance(data.get("initial"), str):
            raise ValueError(f"{origin}: `initial` (the first user turn) is required")
        turns, sources = {}, dict(data.get("sources") or {})
        for kind in KINDS:
            text = data.get(kind)
            if text is None:
                text, sources[kind] = GENERIC[kind], "horizon"
            elif not isinstance(text, str):
                raise ValueError(f"{origin}: `{kind}` must be text, not {type(text).__name__}")
            for name in PLACEHOLDERS[kind]:
                if "{" + name + "}" not in text:
                    raise ValueError(f"{origin}: `{kind}` lacks the placeholder {{{name}}}")
            turns[kind] = text
            sources.setdefault(kind, data.get("source", "file"))
        loop = data.get("loop") or {}
        bad = sorted(set(loop) - set(LoopStyle.__dataclass_fields__))
        if bad:
            raise ValueError(f"{origin}: unknown `loop` key(s) {', '.join(bad)}")
        return cls(turns, LoopStyle(**loop), data.get("source", "file"), data.get("parser_module"), sources)

    @classmethod
    def load(cls, path: str | Path) -> Template:
        try:
            data = yaml.safe_load(Path(path).read_text())
        except (OSError, yaml.YAMLError) as e:
            raise ValueError(f"prompt template {path}: {e}") from None
        if not isinstance(data, dict):
            raise ValueError(f"prompt template {path}: expected a mapping of turn kinds")
        return cls.from_dict(data, origin=f"prompt template {path}")

    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "source": self.source,
            **self.turns,
            "loop": asdict(self.loop),
            "parser_module": self.parser_module,
            "sources": self.sources,
        }

    def save(self, path: str | Path) -> None:
        from horizon.io import atomic_path

        with atomic_path(path) as tmp:
            tmp.write_text(
                "# horizon prompt template (turn kinds and placeholders: horizon/eval/agent/prompts.py)\n"
                + yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True, width=1 << 30)
            )
