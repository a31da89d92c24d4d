"""What a Terminus keystroke string runs: shell commands split into pipelines, with their arguments.

The unit of the trajectory-quality measure (horizon.data.quality) is a *pipeline*: `a | b > f` is
one unit, `a && b; c &` are three. Keystrokes are tokenized by the standard library's shell lexer
(`shlex`, POSIX mode, `punctuation_chars`), which handles quotes, escapes and control operators;
around it this module adds what `shlex` does not know about terminals:

- logical lines: a newline ends a command unless it is inside quotes or escaped;
- here-documents (`<<EOF`, `<<-EOF`, `<<'EOF'`): the body lines are data, not commands;
- quoted operators: `grep '|' f` keeps `|` as an argument (quoted text is shielded before lexing);
- `$( ... )`: the substituted command is a unit of its own;
- keystrokes that are not commands: tmux key names (`C-c`, `Escape`, `Up`), and answers to a
  program's question (`y`, `:wq`, or anything typed when the screen ends in a question such as
  `[Y/n]` or `Password:`).

Lines without quotes, backslashes or `$(` take a regex path that splits exactly as `shlex` does
(tested against it); a line `shlex` cannot read (an unclosed quote) is an unparsed unit, which the
quality measure counts as an action, never an error.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

OBSERVATION_COMMANDS = tuple(
    "cat ls find grep head tail wc diff stat file less tree du df ps env which type pwd".split()
)
# prefixes that run the next word as the command
WRAPPERS = frozenset({"sudo", "time", "nohup", "nice", "command", "builtin", "exec", "stdbuf", "xargs"})
CONTROL = frozenset({"|", "|&", "&&", "||", ";", "&", ";;", "(", ")", "{", "}"})
PIPE = frozenset({"|", "|&"})
FIND_WRITES = frozenset({"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprintf", "-fls"})
KEY_NAME = re.compile(
    r"^(?:[CMS]-\S+|Enter|Escape|Esc|Tab|BTab|BSpace|Space|Up|Down|Left|Right|Home|End|PageUp|PageDown"
    r"|PgUp|PgDn|PPage|NPage|IC|DC|F\d{1,2})$"
)
ANSWER = re.compile(r"^(?:[yYnNqQ]|yes|no|YES|NO|Yes|No|:q!?|:wq!?|:x|\d)$")
QUESTION = re.compile(
    r"(?i)(?:\[y/n\]|\(y/n\)|\[yes/no\]|\(yes/no\)|password[^:\n]*:|passphrase[^:\n]*:|>>>|continue\?"
    r"|proceed\?|\?)\s*$"
)
SHELL_PROMPT = re.compile(r"[#$]\s*$")
_ASSIGN = re.compile(r"^[A-Za-z_]\w*=")
_SIMPLE = re.compile(r"[();<>|&]+|[^\s();<>|&]+")
_HEREDOC = re.compile(r"(?<!<)<<(?![<])(-?)\s*(['\"]?)([\w.-]+)\2")
_SHIELD = {c: chr(0xE000 + i) for i, c in enumerate("();<>|&\n#")}
_UNSHIELD = str.maketrans({v: k for k, v in _SHIELD.items()})


@dataclass
class Unit:
    """One pipeline (kind `observation` or `action`), or one keystroke that runs no command."""

    kind: str  # observation | action | key | input
    names: list[str] = field(default_factory=list)  # program names of the pipeline's commands
    words: list[str] = field(default_factory=list)  # operands, option values, redirect targets
    writes: bool = False  # output redirected to a file, or a find that deletes/executes
    unparsed: bool = False


# ---------------------------------------------------------------------------------------------
# logical lines


def _shield(line: str) -> tuple[str, bool]:
    """Replace operator characters inside quotes with private-use characters; (text, quotes closed)."""
    out, quote, esc = [], "", False
    for ch in line:
        if esc:
            esc = False
        elif ch == "\\" and quote != "'":
            esc = True
        elif quote:
            if ch == quote:
                quote = ""
            elif ch in _SHIELD:
                ch = _SHIELD[ch]
        elif ch in "'\"":
            quote = ch
        out.append(ch)
    return "".join(out), not quote and not esc


def logical_lines(text: str) -> Iterable[str]:
    """Command lines of a keystroke string (operators inside quotes shielded), here-doc bodies skipped."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if "'" in line or '"' in line or "\\" in line:
            shielded, closed = _shield(line)
            while not closed and i < len(lines):  # a newline inside quotes, or a backslash-newline
                line = line + "\n" + lines[i]
                i += 1
                shielded, closed = _shield(line)
            line = shielded
        for m in _HEREDOC.finditer(line):
            strip_tabs = m.group(1) == "-"
            while i < len(lines) and (lines[i].lstrip("\t") if strip_tabs else lines[i]) != m.group(3):
                i += 1
            i += 1  # the delimiter line
        if line.strip():
            yield line


def tokens(line: str) -> list[str]:
    """Shell tokens of one logical line, quotes removed; quoted operator characters stay shielded."""
    if "'" in line or '"' in line or "\\" in line or "$(" in line:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = ""
        toks = list(lexer)
    else:
        toks = _SIMPLE.findall(line)  # the same split as shlex for a line without quotes or escapes
    for i, t in enumerate(toks):
        if t.startswith("#"):  # a comment (a quoted '#' is still shielded here)
            toks = toks[:i]
            break
    return toks  # still shielded: operators are told from quoted text by the caller


# ---------------------------------------------------------------------------------------------
# pipelines


def _segments(toks: Sequence[str]) -> list[list[list[str]]]:
    """Pipelines (lists of simple commands) separated by control operators; `$(` opens a new one."""
    pipelines: list[list[list[str]]] = []
    current: list[list[str]] = [[]]
    for i, t in enumerate(toks):
        if t == "$" and i + 1 < len(toks) and toks[i + 1] == "(":
            continue  # $( ... ): the substituted command is its own unit
        if t in PIPE:
            current.append([])
        elif t in CONTROL or (t[0] in ";&|(" and set(t) <= set(";&|()")):
            pipelines.append(current)
            current = [[]]
        else:
            current[-1].append(t.translate(_UNSHIELD))
    pipelines.append(current)
    return [[c for c in p if c] for p in pipelines if any(p)]


def _redirect(tok: str) -> bool:
    return tok[0] in "<>&" and set(tok) <= set("<>&|")


def simple_command(words: Sequence[str], unit: Unit) -> None:
    """Add one simple command's program name, arguments and writes to `unit`."""
    i, args, name = 0, [], None
    while i < len(words):
        w = words[i]
        nxt = words[i + 1] if i + 1 < len(words) else None
        if w.isdigit() and nxt is not None and _redirect(nxt):
            i += 1  # a file-descriptor number (2>&1)
            continue
        if _redirect(w):
            unit.writes |= _writes(w, nxt)
            if nxt is not None and w not in ("<<", "<<-", "<<<") and not (w.endswith("&") and nxt.isdigit()):
                args.append(nxt)
            i += 2
            continue
        if name in (None, "env") and _ASSIGN.match(w):
            args.append(w.split("=", 1)[1])  # an assignment before the command (or env's)
        elif name is None and w in WRAPPERS:
            pass
        elif name is None or (name == "env" and not w.startswith("-")):
            name = w.rsplit("/", 1)[-1]  # `env VAR=x prog` runs prog
            if "/" in w:
                args.append(w)  # ./run.sh: the program itself is a file the agent may have seen
        elif w.startswith("--") and "=" in w:
            args.append(w.split("=", 1)[1])
        elif not (w.startswith("-") or w.startswith("+")):
            args.append(w)
        elif name == "find" and w in FIND_WRITES:
            unit.writes = True
        i += 1
    unit.names.append(name or "=")
    unit.words.extend(args)


def _writes(op: str, target: str | None) -> bool:
    """An output redirection to a file (not /dev/null, not a descriptor such as >&2)."""
    if ">" not in op or target is None or op.endswith("&"):
        return False
    return target != "/dev/null" and not target.isdigit()


def parse_line(line: str, observe: frozenset[str]) -> list[Unit]:
    """The units of one logical line; an unreadable line is one unparsed action."""
    try:
        toks = tokens(line)
    except ValueError:
        return [Unit("action", unparsed=True)]
    units = []
    for pipeline in _segments(toks):
        unit = Unit("action")
        for words in pipeline:
            simple_command(words, unit)
        reads_only = all(n in observe for n in unit.names) and not unit.writes
        unit.kind = "observation" if reads_only else "action"
        units.append(unit)
    return units


def parse_keystrokes(keystrokes: str, observe: frozenset[str], after_question: bool = False) -> list[Unit]:
    """The units of one keystroke string. `after_question`: the screen before it ends in a question."""
    text = keystrokes.strip()
    if not text:
        return []
    if KEY_NAME.match(text):
        return [Unit("key", names=[text])]
    if ANSWER.match(text) or (after_question and "\n" not in text):
        return [Unit("input")]
    units = []
    for line in logical_lines(keystrokes):
        units.extend(parse_line(line, observe))
    return units


def ends_with_question(screen: str) -> bool:
    """The last non-empty line of a screen asks something and is not a shell prompt."""
    tail = screen.rstrip()
    last = tail[tail.rfind("\n") + 1 :]
    return bool(last) and not SHELL_PROMPT.search(last) and bool(QUESTION.search(last))
