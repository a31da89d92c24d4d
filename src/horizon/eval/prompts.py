"""Prompt templates of the harness: the first user turn and the follow-up user turns.

A template is a YAML file with these keys (placeholders in braces; other braces are left alone,
so JSON examples need no escaping):

  initial      first user turn: {instruction}, {screen}
  observation  after an episode: {output}
  confirm      after the first task_complete: {output}; must match corpus.confirmation_pattern
  parse_error  after an unparseable answer: {error}
  warnings     prepended to the next turn when an answer had warnings: {warnings}

For real runs the template is extracted from the corpus itself (`horizon extract-template`, the
`prompt_template` rule), so evaluation prompts match the training data byte for byte; the demo
uses the compact template in demo/prompt.yaml, written for this project.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

log = logging.getLogger("horizon.eval.prompts")

FIELDS = ("initial", "observation", "confirm", "parse_error", "warnings")


@dataclass
class Template:
    initial: str
    observation: str
    confirm: str
    parse_error: str
    warnings: str = "{warnings}\n\n"

    @staticmethod
    def fill(text: str, **values: str) -> str:
        for k, v in values.items():
            text = text.replace("{" + k + "}", v)
        return text

    def first(self, instruction: str, screen: str) -> str:
        return self.fill(self.initial, instruction=instruction, screen=screen)

    def after(self, kind: str, warnings: list[str] | None = None, **values: str) -> str:
        body = self.fill(getattr(self, kind), **values)
        if warnings:
            body = self.fill(self.warnings, warnings="\n".join(f"- {w}" for w in warnings)) + body
        return body

    @classmethod
    def load(cls, path: str | Path) -> Template:
        data = yaml.safe_load(Path(path).read_text()) or {}
        missing = [k for k in FIELDS[:4] if not isinstance(data.get(k), str)]
        if missing:
            raise ValueError(f"prompt template {path}: missing key(s) {', '.join(missing)}")
        for key, needed in (
            ("initial", ("{instruction}", "{screen}")),
            ("observation", ("{output}",)),
            ("confirm", ("{output}",)),
            ("parse_error", ("{error}",)),
        ):
            for ph in needed:
                if ph not in data[key]:
                    raise ValueError(f"prompt template {path}: `{key}` lacks the placeholder {ph}")
        return cls(**{k: data[k] for k in FIELDS if k in data})

    def save(self, path: str | Path) -> None:
        from horizon.io import atomic_path

        with atomic_path(path) as tmp:
            tmp.write_text(
                "# horizon prompt template (see horizon/prompts.py for the placeholders)\n"
                + yaml.safe_dump(asdict(self), sort_keys=False, allow_unicode=True, width=1 << 30)
            )


# ---------------------------------------------------------------------------------------------
# extraction from a corpus


class ExtractionError(ValueError):
    pass


def _initial_form(conversations, task_marker: str, screen_marker: str) -> str:
    heads, mids = Counter(), Counter()
    for c in conversations:
        if not c or c[0]["role"] != "user":
            continue
        m = re.match(
            rf"(?s)(.*?{re.escape(task_marker)}\s*)(.*?)(\s*{re.escape(screen_marker)}\s*)(.*)$",
            c[0]["content"],
        )
        if m:
            heads[m.group(1)] += 1
            mids[m.group(3)] += 1
    if not heads:
        raise ExtractionError(f"no first user turn contains {task_marker!r} ... {screen_marker!r}")
    return heads.most_common(1)[0][0] + "{instruction}" + mids.most_common(1)[0][0] + "{screen}"


def _follow_up_turns(conversations, conf: re.Pattern) -> tuple[list[str], list[str], list[str]]:
    """(observations, confirmations, parse-error turns): user turns after the first, by what preceded them."""
    from horizon.terminus import ParseError, parse_response

    observations, confirms, errors = [], [], []
    for conv in conversations:
        for i in range(2, len(conv), 2):
            text = conv[i]["content"]
            try:
                parse_response(conv[i - 1]["content"])
                parsed = True
            except ParseError:
                parsed = False
            if conf.search(text):
                confirms.append(text)
            elif not parsed:
                errors.append(text)
            else:
                observations.append(text)
    return observations, confirms, errors


def _confirm_form(confirms: list[str], conf: re.Pattern, obs_head: str) -> str | None:
    forms = Counter()
    for t in confirms:
        m = conf.search(t)
        q_start = t.rfind("\n\n", 0, m.start())
        pre = (
            t[: t.find(obs_head) + len(obs_head)] if obs_head in t[: q_start if q_start > 0 else None] else ""
        )
        if q_start > 0:
            forms[(pre, t[q_start:])] += 1
    if not forms:
        return None
    (pre, question), _ = forms.most_common(1)[0]
    return pre + "{output}" + question


def _parse_error_form(errors: list[str]) -> str | None:
    forms = Counter()
    for t in errors:
        lines = t.split("\n")
        err_i = next((i for i, x in enumerate(lines) if x.startswith(("ERROR", "WARNING"))), None)
        if err_i is not None:
            end = next((j for j in range(err_i, len(lines)) if lines[j] == ""), len(lines))
            forms[("\n".join(lines[:err_i]) + "\n", "\n" + "\n".join(lines[end:]))] += 1
    if not forms:
        return None
    (pre, post), _ = forms.most_common(1)[0]
    return pre + "{error}" + post


# our own wording, used only when the corpus has no turn of that kind to copy the form from
GENERIC_CONFIRM = (
    "{output}\n\nDo you want to mark the task as complete? Send task_complete true again to confirm."
)
GENERIC_PARSE_ERROR = "Your answer could not be used:\n{error}\n\nReply with one valid JSON object."


def extract(
    conversations: list[list[dict]],
    confirmation_pattern: str,
    task_marker: str = "Task Description:",
    screen_marker: str = "Current terminal state:",
) -> Template:
    """Recover the harness template from trajectories (the most common form of each turn kind)."""
    initial = _initial_form(conversations, task_marker, screen_marker)
    conf = re.compile(confirmation_pattern)
    observations, confirms, errors = _follow_up_turns(conversations, conf)
    obs_first = Counter(t.split("\n", 1)[0] for t in observations if "\n" in t)
    if not obs_first:
        raise ExtractionError("no observation turns found")
    obs_head = obs_first.most_common(1)[0][0] + "\n"
    confirm = _confirm_form(confirms, conf, obs_head)
    if confirm is None:
        log.warning("no confirmation turn found: using a generic confirmation question")
    return Template(
        initial=initial,
        observation=obs_head + "{output}",
        confirm=confirm or GENERIC_CONFIRM,
        parse_error=_parse_error_form(errors) or GENERIC_PARSE_ERROR,
    )


def extract_from_parquet(
    trajectories: str | Path, out: str | Path, confirmation_pattern: str, max_rows: int = 2000
) -> Template:
    import pyarrow.parquet as pq

    convs = []
    for batch in pq.ParquetFile(trajectories).iter_batches(batch_size=256, columns=["conversations"]):
        convs += batch.column("conversations").to_pylist()
        if len(convs) >= max_rows:
            break
    t = extract(convs[:max_rows], confirmation_pattern)
    if not re.search(confirmation_pattern, t.confirm):
        raise ExtractionError(f"the extracted confirmation turn does not match {confirmation_pattern!r}")
    t.save(out)
    log.info("prompt template extracted from %d trajectories -> %s", len(convs[:max_rows]), out)
    return t
