"""The harness's prompt template, recovered from the corpus itself (eval.prompt_template: null).

Each turn kind takes the most common form the corpus shows: the first user turn (`initial`), how
the terminal is shown (`terminal_screen`, `terminal_new`), the confirmation question, and, when the
reference parser is there to word the feedback exactly, the parse-error and warning turns. Kinds
the corpus never shows come from the reference Terminus-2 whose first turn matches the corpus's
(when `make refenv` has installed it), else from horizon's generic wording. The log and the
template's `sources:` say which kinds came from where.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from pathlib import Path

from horizon.eval.agent.prompts import KINDS, Template
from horizon.terminus import answer_view, parse

log = logging.getLogger("horizon.eval.agent.extract")


class ExtractionError(ValueError):
    pass


def _initial_form(conversations, task_marker: str, screen_marker: str) -> tuple[str, str | None]:
    """(initial template, the first line of the terminal state it shows, if one line is common)."""
    heads, mids, screens = Counter(), Counter(), Counter()
    for c in conversations:
        if not c or c[0]["role"] != "user":
            continue
        m = re.match(
            rf"(?s)(.*?{re.escape(task_marker)}\s*)(.*?)(\s*{re.escape(screen_marker)}\s*)(.*)$",
            c[0]["content"],
        )
        if m:
            heads[m[1]] += 1
            mids[m[3]] += 1
            if "\n" in m[4]:
                screens[m[4].split("\n", 1)[0]] += 1
    if not heads:
        raise ExtractionError(f"no first user turn contains {task_marker!r} ... {screen_marker!r}")
    screen_head = screens.most_common(1)[0][0] if screens else None
    return heads.most_common(1)[0][0] + "{instruction}" + mids.most_common(1)[0][0] + "{screen}", screen_head


def _follow_ups(conversations, conf: re.Pattern, wording):
    """Yield (kind, turn, error, warning) for every user turn after the first, by what preceded it."""
    for conv in conversations:
        for i in range(2, len(conv), 2):
            text, answer = conv[i]["content"], conv[i - 1]["content"]
            r = parse(answer)
            if wording is not None:
                error, warning = wording.feedback(answer_view(answer))[:2]
            else:
                error, warning = (str(r.error) if r.error else ""), ""
            if conf.search(text):
                yield "confirm", text, error, warning
            elif r.error is not None:
                yield "error", text, error, warning
            else:
                if wording is None:
                    warning = "- " + "\n- ".join(map(str, r.warnings)) if r.warnings else ""
                yield "observation", text, error, warning


def _common(forms: Counter) -> str | None:
    return forms.most_common(1)[0][0] if forms else None


def _new_output_form(items, screen_head: str | None) -> str | None:
    """How new output is shown: the most common first line of plain observations."""
    heads = Counter()
    for kind, text, _, warning in items:
        if kind == "observation" and not warning and "\n" in text:
            if not (screen_head and text.startswith(screen_head + "\n")):
                heads[text.split("\n", 1)[0]] += 1
    return _common(heads) + "\n{output}" if heads else None


def _warnings_form(items, heads: tuple[str, ...]) -> str | None:
    """Observations after an answer with warnings: the frame around the (exactly worded) warnings."""
    forms = Counter()
    for kind, text, _, warning in items:
        if kind != "observation" or not warning or warning not in text:
            continue
        pre, rest = text.split(warning, 1)
        cuts = [rest.find("\n\n" + h) for h in heads if rest.find("\n\n" + h) >= 0]
        if cuts:
            forms[pre + "{warnings}" + rest[: min(cuts) + 2] + "{output}"] += 1
    return _common(forms)


def _error_forms(items, wording) -> dict[str, str]:
    plain, both = Counter(), Counter()
    for kind, text, error, warning in items:
        if kind != "error" or not error:
            continue
        if wording is not None and error in text:
            pre, post = text.split(error, 1)
            if warning and warning in post:
                mid, end = post.split(warning, 1)
                both[pre + "{error}" + mid + "{warnings}" + end] += 1
            elif not warning:
                plain[pre + "{error}" + post] += 1
        elif wording is None:  # our own wording: keep the frame around the harness's error lines
            lines = text.split("\n")
            at = next((j for j, x in enumerate(lines) if x.startswith(("ERROR", "WARNING"))), None)
            if at is not None:
                end = next((j for j in range(at, len(lines)) if lines[j] == ""), len(lines))
                plain["\n".join(lines[:at]) + "\n{error}\n" + "\n".join(lines[end:])] += 1
    out = {}
    if plain:
        out["parse_error"] = _common(plain)
    if both:
        out["parse_error_warnings"] = _common(both)
    return out


def _confirm_form(items, conf: re.Pattern, heads: tuple[str, ...]) -> str | None:
    forms = Counter()
    for kind, text, _, _ in items:
        if kind != "confirm":
            continue
        m = conf.search(text)
        q_start = text.rfind("\n\n", 0, m.start())
        if q_start <= 0:
            continue
        starts = [text.find(h) for h in heads if 0 <= text.find(h) < q_start]
        pre = text[: min(starts)] if starts else ""
        forms[(pre, text[q_start:])] += 1
    if not forms:
        return None
    pre, question = _common(forms)
    return pre + "{output}" + question


def extract(
    conversations: list[list[dict]],
    confirmation_pattern: str,
    task_marker: str = "Task Description:",
    screen_marker: str = "Current terminal state:",
    fallback: Template | None = None,
) -> Template:
    """The harness template from trajectories (most common form of each kind), plus `fallback`'s
    (or the generic) wording for the kinds the corpus does not show."""
    from horizon.eval.reference.environment import ReferenceParser

    wording = ReferenceParser(fallback.parser_module) if fallback and fallback.parser_module else None
    initial, screen_head = _initial_form(conversations, task_marker, screen_marker)
    conf = re.compile(confirmation_pattern)
    items = list(_follow_ups(conversations, conf, wording))
    turns = {"initial": initial}
    if screen_head:
        turns["terminal_screen"] = screen_head + "\n{screen}"
    new = _new_output_form(items, screen_head)
    if new is None:
        raise ExtractionError("no observation turns found")
    turns["terminal_new"] = new
    heads = tuple(t.split("\n", 1)[0] for t in (turns.get("terminal_screen"), new) if t)
    warned = _warnings_form(items, heads) if wording is not None else None
    if warned:
        turns["warnings"] = warned
    confirm = _confirm_form(items, conf, heads)
    if confirm:
        turns["confirm"] = confirm
    turns.update(_error_forms(items, wording))
    found = sorted(turns)
    base = fallback.to_dict() if fallback else {"format": 2, "source": "horizon"}
    data = {**{k: v for k, v in base.items() if k not in ("sources", "source")}, **turns, "source": "corpus"}
    data["sources"] = {
        k: "corpus" if k in turns else base.get("source", "horizon") for k in KINDS if k in data
    }
    template = Template.from_dict(data, origin="the extracted template")
    log.info(
        "turn kinds the corpus shows: %s; from %s: %s",
        ", ".join(found),
        base.get("source", "horizon"),
        ", ".join(k for k, v in template.sources.items() if v != "corpus"),
    )
    return template


def fallback_template(conversations, env=None) -> Template | None:
    """The reference package's template whose first turn matches the corpus's, if installed."""
    from horizon.eval.reference.environment import SOURCES, available, run_program

    if not available(env):
        log.warning(
            "no reference Terminus-2 environment (make refenv): kinds the corpus lacks get generic wording"
        )
        return None
    exports = run_program([{"op": "export", "variant": v} for v in SOURCES.values()], env)
    first = next((c[0]["content"] for c in conversations if c), "")
    for data in exports:
        head = data["initial"].split("{instruction}", 1)[0]
        if first.startswith(head):
            return Template.from_dict(data, origin=data["source"])
    return Template.from_dict(exports[0], origin=exports[0]["source"])


def extract_from_parquet(
    trajectories: str | Path, out: str | Path, confirmation_pattern: str, max_rows: int = 2000, env=None
) -> Template:
    import pyarrow.parquet as pq

    convs = []
    for batch in pq.ParquetFile(trajectories).iter_batches(batch_size=256, columns=["conversations"]):
        convs += batch.column("conversations").to_pylist()
        if len(convs) >= max_rows:
            break
    convs = convs[:max_rows]
    t = extract(convs, confirmation_pattern, fallback=fallback_template(convs, env))
    if not re.search(confirmation_pattern, t.turns["confirm"]):
        raise ExtractionError(f"the extracted confirmation turn does not match {confirmation_pattern!r}")
    t.save(out)
    log.info("prompt template extracted from %d trajectories -> %s", len(convs), out)
    return t
