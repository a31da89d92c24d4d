"""Output truncation, the terminal's incremental output and keystroke delivery against theirs."""

from __future__ import annotations

import pytest

from horizon.eval.agent.prompts import Template
from horizon.eval.agent.terminal import Terminal, limit_output
from horizon.eval.sandbox import ExecResult
from tests.conformance.cases import INCREMENTAL_CASES, KEY_PAYLOADS, TRUNCATION_CASES
from tests.conformance.conftest import VARIANTS


def template(reference, v) -> Template:
    return Template.from_dict(reference[v]["template"], origin=v)


@pytest.mark.parametrize(
    ("variant", "name"), [(v, n) for v in VARIANTS for n in TRUNCATION_CASES],
    ids=[f"truncation-{v}-{n}" for v in VARIANTS for n in TRUNCATION_CASES],
)  # fmt: skip
def test_truncation(reference, variant, name):
    marker = template(reference, variant).turns["truncation"]
    assert limit_output(TRUNCATION_CASES[name], 10_000, marker) == reference[variant]["limit"][name]


class CaptureSandbox:
    """FAKE sandbox: answers tmux captures from a script, records everything else (runs nothing)."""

    def __init__(self, captures=()):
        self.captures, self.now, self.log = list(captures), None, []

    def exec(self, argv, timeout=None, env=None, cwd="/app", input=None, max_bytes=1 << 20):
        if argv[:3] == ["tmux", "capture-pane", "-p"]:
            if "-S" in argv:
                self.now = self.captures.pop(0)
                return ExecResult(0, self.now[0], "")
            return ExecResult(0, self.now[1], "")
        self.log.append((list(argv), input))
        return ExecResult(0, "", "")

    def alive(self):
        return True


@pytest.mark.parametrize(
    ("variant", "name"), [(v, n) for v in VARIANTS for n in INCREMENTAL_CASES],
    ids=[f"incremental-{v}-{n}" for v in VARIANTS for n in INCREMENTAL_CASES],
)  # fmt: skip
def test_incremental_output(reference, variant, name):
    t = template(reference, variant)
    captures = INCREMENTAL_CASES[name]
    term = Terminal(CaptureSandbox(captures), t.turns["terminal_screen"], t.turns["terminal_new"], variant)
    assert [term.incremental() for _ in captures] == reference[variant]["incremental"][name]


def _same_session(argv: list[str]) -> list[str]:
    out = list(argv)
    for i in range(len(out) - 1):
        if out[i] == "-t":
            out[i + 1] = "SESSION"
    return out


def our_operations(log) -> list:
    import base64

    ops, chunks = [], []
    for argv, _ in log:
        if argv[:2] == ["sh", "-c"]:
            chunks.append(argv[4])
        elif argv[:2] == ["tmux", "paste-buffer"]:
            ops.append(["paste", base64.b64decode("".join(chunks)).decode("utf-8")])
            chunks = []
        elif argv[:2] != ["tmux", "load-buffer"] and argv[0] != "rm":
            ops.append(["argv", _same_session(argv)])
    return ops


@pytest.mark.parametrize(
    ("variant", "name"), [(v, n) for v in VARIANTS for n in KEY_PAYLOADS],
    ids=[f"keys-{v}-{n}" for v in VARIANTS for n in KEY_PAYLOADS],
)  # fmt: skip
def test_keystrokes_to_tmux(reference, variant, name):
    sb = CaptureSandbox()
    Terminal(sb, style=variant).send(KEY_PAYLOADS[name])
    theirs = [[op, _same_session(x) if op == "argv" else x] for op, x in reference[variant]["keys"][name]]
    assert our_operations(sb.log) == theirs
