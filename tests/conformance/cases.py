"""The inputs the conformance suite feeds to the published Terminus-2 and to ours.

Parser cases state what the reference parser is handed (`sees`): "raw" (no reasoning parser can
split the text: it has no complete <think>...</think>) or "after_think" (a Qwen3 model served by
vLLM with its reasoning parser hands over only what follows </think>). The suite checks that our
answer_view() agrees with that statement, then compares both parsers on the same text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    id: str
    text: str
    sees: str = "raw"  # raw | after_think

    def reference_input(self) -> str:
        if self.sees == "raw":
            return self.text
        return self.text.split("<think>", 1)[1].split("</think>", 1)[1]


def obj(**fields) -> str:
    base = {"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\n", "duration": 0.1}]}
    base.update(fields)
    return json.dumps(base)


def cmds(*items, **fields) -> str:
    return obj(commands=list(items), **fields)


OK = obj(task_complete=False)
LONG_ANALYSIS = "x" * 300

PARSER_CASES = [
    # well-formed, with and without reasoning
    Case("valid", OK),
    Case("valid-pretty", json.dumps(json.loads(OK), indent=2)),
    Case("valid-think", "<think>\nlook first\n</think>\n\n" + OK, "after_think"),
    Case("think-with-braces", '<think>I will send {"x": 1} later</think>\n' + OK, "after_think"),
    Case("think-with-json", "<think>" + obj(plan="draft") + "</think>" + OK, "after_think"),
    Case("text-before-think", "preamble <think>r</think>" + OK, "after_think"),
    Case("think-unclosed-json", "<think>\nstill reasoning\n" + OK, "raw"),
    Case("think-unclosed-only", "<think>\nI am thinking about { and more", "raw"),
    Case("think-end-only", "reasoning without a start</think>\n" + OK, "raw"),
    Case("think-nothing-after", "<think>all reasoning</think>", "after_think"),
    Case("think-text-after-json", "<think>r</think>" + OK + "\nDone.", "after_think"),
    # text around the object
    Case("text-before", "Here is my answer:\n" + OK),
    Case("text-after", OK + "\nI hope this helps."),
    Case("text-both", "Answer:\n" + OK + "\nEnd."),
    Case("code-fence", "```json\n" + OK + "\n```"),
    Case("two-objects", OK + "\n" + obj(plan="second")),
    Case("quote-in-prose", 'He said "go and then ' + OK),
    Case("backslash-in-prose", "C:\\" + OK),
    Case("brace-in-prose-before", "a } b " + OK),
    Case("open-braces-in-prose", "{{{ " + OK),
    # repairs
    Case("missing-final-brace", OK[:-1]),
    Case("missing-two-braces", cmds({"keystrokes": "ls\n", "duration": 1})[:-2]),
    Case("missing-bracket-and-brace", cmds({"keystrokes": "ls\n", "duration": 1})[:-2].rstrip("]")),
    Case("mixed-content-inner-first", 'x "y {"keystrokes": "ls"} ' + OK),
    Case("cut-mid-string", OK[: len(OK) // 2]),
    # invalid JSON
    Case("trailing-comma", OK[:-1] + ",}"),
    Case("single-quotes", OK.replace('"', "'")),
    Case("unquoted-value", '{"analysis": "a", "plan": p, "commands": []}'),
    Case("invalid-long", '{"analysis": "' + LONG_ANALYSIS + '", "plan": p, "commands": []}'),
    Case("nan-duration", OK.replace("0.1", "NaN")),
    # structure
    Case("empty-object", "{}"),
    Case("missing-analysis", json.dumps({"plan": "p", "commands": []})),
    Case("missing-plan-commands", json.dumps({"analysis": "a"})),
    Case("missing-commands-complete", json.dumps({"analysis": "a", "plan": "p", "task_complete": True})),
    Case("analysis-number", obj(analysis=1)),
    Case("plan-list", obj(plan=["x"])),
    Case("analysis-null", obj(analysis=None)),
    Case("commands-string", obj(commands="ls")),
    Case("commands-object", obj(commands={"keystrokes": "ls"})),
    Case("commands-empty", obj(commands=[])),
    Case("extra-top-field", obj(extra=1)),
    Case("duplicate-keys", OK[:-1] + ', "plan": "again"}'),
    Case("top-level-array", "[" + OK + "]"),
    # commands
    Case("command-string", cmds("ls")),
    Case("command-no-keystrokes", cmds({"duration": 1})),
    Case("keystrokes-number", cmds({"keystrokes": 5, "duration": 1})),
    Case("keystrokes-null", cmds({"keystrokes": None})),
    Case("bad-third-command", cmds({"keystrokes": "a\n"}, {"keystrokes": "b", "duration": 1}, 7)),
    Case("duration-missing", cmds({"keystrokes": "ls\n"})),
    Case("duration-string", cmds({"keystrokes": "ls\n", "duration": "5"})),
    Case("duration-negative", cmds({"keystrokes": "ls\n", "duration": -3})),
    Case("duration-zero", cmds({"keystrokes": "ls\n", "duration": 0})),
    Case("duration-true", cmds({"keystrokes": "ls\n", "duration": True})),
    Case("duration-null", cmds({"keystrokes": "ls\n", "duration": None})),
    Case("duration-huge", cmds({"keystrokes": "ls\n", "duration": 1e308})),
    Case("duration-int", cmds({"keystrokes": "ls\n", "duration": 3})),
    Case("unknown-field", cmds({"keystrokes": "ls\n", "duration": 1, "is_blocking": True})),
    Case("unknown-fields-two", cmds({"keystrokes": "ls\n", "duration": 1, "x": 1, "y": 2})),
    Case(
        "no-newline-between",
        cmds({"keystrokes": "ls", "duration": 1}, {"keystrokes": "pwd\n", "duration": 1}),
    ),
    Case(
        "empty-then-command", cmds({"keystrokes": "", "duration": 1}, {"keystrokes": "pwd\n", "duration": 1})
    ),
    Case(
        "last-without-newline",
        cmds({"keystrokes": "ls\n", "duration": 1}, {"keystrokes": "C-c", "duration": 1}),
    ),
    Case(
        "many-warnings",
        cmds({"keystrokes": "a"}, {"keystrokes": "b", "duration": "x", "z": 0}, {"keystrokes": "c"}),
    ),
    Case("special-key", cmds({"keystrokes": "C-c", "duration": 0.5})),
    Case(
        "carriage-return", cmds({"keystrokes": "ls\r", "duration": 1}, {"keystrokes": "pwd\n", "duration": 1})
    ),
    Case("heredoc", cmds({"keystrokes": "cat > f.py << 'EOF'\nprint(\"{}\")\nEOF\n", "duration": 1})),
    # task_complete
    Case("complete-true", obj(task_complete=True)),
    Case("complete-yes", obj(task_complete="yes")),
    Case("complete-no", obj(task_complete="no")),
    Case("complete-TRUE", obj(task_complete="TRUE")),
    Case("complete-string-1", obj(task_complete="1")),
    Case("complete-int-1", obj(task_complete=1)),
    Case("complete-int-0", obj(task_complete=0)),
    Case("complete-null", obj(task_complete=None)),
    Case("complete-list", obj(task_complete=[])),
    Case("complete-with-bad-command", cmds({"duration": 1}, task_complete=True)),
    Case("incomplete-with-bad-command", cmds({"duration": 1}, task_complete=False)),
    Case("complete-yes-bad-command", cmds("ls", task_complete="yes")),
    # field order
    Case("order-reversed", json.dumps({"commands": [], "plan": "p", "analysis": "a"})),
    Case("order-plan-first", json.dumps({"plan": "p", "analysis": "a", "commands": []})),
    Case(
        "order-key-in-string", json.dumps({"analysis": 'see "commands": below', "plan": "p", "commands": []})
    ),
    # text content
    Case("nested-quotes", cmds({"keystrokes": 'echo "a \\"b\\" c"\n', "duration": 1})),
    Case("unicode", cmds({"keystrokes": "echo ✓ 日本 🚀\n", "duration": 1}, analysis="é")),
    Case("unicode-escapes", OK.replace('"a"', '"\\u00e9\\ud83d\\ude80"')),
    Case("braces-in-strings", obj(analysis="a } { b", plan="{{")),
    # nothing usable
    Case("empty", ""),
    Case("whitespace", "  \n\t "),
    Case("prose", "I cannot do that."),
    Case("over-long-cut", "<think>" + "step " * 2000 + "</think>" + OK[:40], "after_think"),
]

# Inputs that make our parser report exactly one issue: run through the reference parser, they
# tell which of its messages means what (its wording is never written down here).
EXEMPLARS = {
    ("no_json",): "hello",
    ("invalid_json",): '{"analysis": "a", "plan": "p", "commands": [],}',
    ("missing_fields",): '{"analysis": "a"}',
    ("commands_not_array",): obj(commands="ls"),
    ("command_not_object",): cmds("ls"),
    ("command_no_keystrokes",): cmds({"duration": 1}),
    ("keystrokes_not_string",): cmds({"keystrokes": 1, "duration": 1}),
    ("text_before",): "x " + OK,
    ("text_after",): OK + " x",
    ("field_not_string", "analysis"): obj(analysis=1),
    ("field_not_string", "plan"): obj(plan=1),
    ("field_order",): json.dumps({"plan": "p", "analysis": "a", "commands": []}),
    ("task_complete_type",): obj(task_complete=2),
    ("duration_missing",): cmds({"keystrokes": "ls\n"}),
    ("duration_invalid",): cmds({"keystrokes": "ls\n", "duration": "x"}),
    ("unknown_fields",): cmds({"keystrokes": "ls\n", "duration": 1, "zz": 1}),
    ("missing_newline",): cmds({"keystrokes": "ls", "duration": 1}, {"keystrokes": "pwd\n", "duration": 1}),
    ("auto_fixed", "closing braces added"): OK[:-1],
    ("auto_fixed", "object extracted"): 'say "x ' + OK,
}

TRUNCATION_CASES = {
    "short": "hello\n",
    "exactly-limit": "a" * 10_000,
    "one-over": "a" * 10_001,
    "ascii-long": "".join(f"line {i}\n" for i in range(3000)),
    "cut-inside-2-byte": "é" * 6000,
    "cut-inside-3-byte": "x" + "日" * 4000,
    "cut-inside-4-byte": "xy" + "🚀" * 3000,
    "tail-cut-4-byte": "🚀" * 3000 + "z",
    "mixed": ("ab✓🚀日\n" * 2000),
    "huge": "0123456789" * 3000,
}

KEY_PAYLOADS = {
    "plain": "ls -la\n",
    "no-newline": "echo hi",
    "empty": "",
    "special-C-c": "C-c",
    "special-Enter": "Enter",
    "special-with-newline": "C-c\n",
    "multi-line": "cd /app\nls\n",
    "leading-dash": "-v\n",
    "quotes": "echo 'a' \"b\" $HOME `x`\n",
    "unicode": "echo ✓ 日本\n",
    "heredoc-small": "cat > /app/a.txt << 'EOF'\nline 1\nline 2\nEOF\n",
    "heredoc-15k": "cat > /app/big.txt << 'EOF'\n" + "y" * 15_000 + "\nEOF\n",
    "heredoc-20k": "cat > /app/big.txt << 'EOF'\n" + ("row ' \" $ \\ ✓\n" * 1500) + "EOF\n",
    "heredoc-70k": "python3 - << 'EOF'\n" + "print(1)\n" * 9000 + "EOF\n",
}

# (full history capture, visible screen) sequences for the incremental output
SCREEN = "root@box:/app# \n" + "\n" * 39
INCREMENTAL_CASES = {
    "echo": [
        ("root@box:/app# \n" + "\n" * 39, SCREEN),
        ("root@box:/app# echo hi\nhi\nroot@box:/app# \n" + "\n" * 37, "x"),
    ],
    "no-new-output": [
        ("root@box:/app# \n" + "\n" * 39, SCREEN),
        ("root@box:/app# \n" + "\n" * 39, SCREEN),
        ("root@box:/app# \n" + "\n" * 39, SCREEN),
    ],
    "two-commands": [
        ("root@box:/app# \n", SCREEN),
        ("root@box:/app# ls\na b\nroot@box:/app# \n", "ls screen"),
        ("root@box:/app# ls\na b\nroot@box:/app# pwd\n/app\nroot@box:/app# \n", "pwd screen"),
    ],
    "scrolled-out": [
        ("root@box:/app# \n", SCREEN),
        ("1\n2\n3\nroot@box:/app# \n", "3\nroot@box:/app# \n"),
    ],
    "cleared": [
        ("root@box:/app# ls\na\nroot@box:/app# \n", SCREEN),
        ("root@box:/app# ls\na\nroot@box:/app# clear\n", "root@box:/app# \n"),
        ("root@box:/app# \n", "root@box:/app# \n"),
    ],
}
