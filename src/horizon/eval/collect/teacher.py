"""A scripted teacher: solves bundled tasks through the real harness, the way a careful agent would.

It is a Backend like any model: given the conversation so far, it answers with reasoning and one
Terminus-2 JSON object. Its plan comes from the task's `solution/teacher.yaml`:

  inspect:  [commands]        look around first
  steps:    [commands]        the solution
  verify:   [commands]        check the result
  mistake:  {wrong: command, why: text}   a likely wrong first try (it really fails in the sandbox)

Variants make trajectories of different lengths and kinds:
  0  inspect (first command only), act, complete, confirm
  1  inspect, act, verify, complete, confirm
  2  inspect, make the mistake, read the error, act, verify, complete, confirm     (reactive)
  3  inspect twice, mistake, act, verify twice, complete, confirm                   (longest)
Without teacher.yaml it falls back to `ls -la` and the lines of solution/solve.sh.

Two styles (a teacher comparison, corpus.collect.style): `careful` (above) inspects before acting;
`blind` makes the same variants without the inspect turns: it acts on the task statement alone
and reads the screen only to verify or to recover from its mistake. Both solve every task.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from horizon.eval.models.backends import Backend, Completion
from horizon.terminus import Command, render_response


def load_plan(task_path: str | Path) -> dict:
    p = Path(task_path)
    f = p / "solution" / "teacher.yaml"
    if f.exists():
        plan = yaml.safe_load(f.read_text()) or {}
    else:
        solve = p / "solution" / "solve.sh"
        if not solve.exists():
            solve = p / "solution.sh"
        lines = (
            [x for x in solve.read_text().splitlines() if x.strip() and not x.lstrip().startswith("#")]
            if solve.exists()
            else []
        )
        plan = {"inspect": ["ls -la"], "steps": lines}
    for key in ("inspect", "steps", "verify"):
        plan.setdefault(key, [])
    if not plan["steps"]:
        raise ValueError(f"{p}: the teacher has no solution steps (solution/teacher.yaml or solve.sh)")
    return plan


STYLES = ("careful", "blind")


def script(plan: dict, variant: int, style: str = "careful") -> list[tuple[str, list[str], bool]]:
    """[(thought, commands, task_complete)] for a variant; the last two turns are complete+confirm."""
    if style not in STYLES:
        raise ValueError(f"unknown teacher style {style!r} (allowed: {', '.join(STYLES)})")
    inspect, steps, verify = plan["inspect"], plan["steps"], plan["verify"]
    mistake = plan.get("mistake")
    turns: list[tuple[str, list[str], bool]] = []
    if style == "blind":
        pass  # acts on the task statement alone
    elif variant == 0:
        turns.append(("Look at the working directory first.", inspect[:1], False))
    elif variant == 3:
        turns.append(("Look at the working directory first.", inspect[:1], False))
        turns.append(("Look closer at the input.", inspect[1:] or ["ls -F"], False))
    else:
        turns.append(("Look at the working directory and the input first.", inspect, False))
    if variant >= 2 and mistake:
        turns.append((mistake.get("thought", "Try the direct approach."), [mistake["wrong"]], False))
        turns.append(
            (f"That failed: {mistake.get('why', 'the output shows an error')}. Fix it.", steps, False)
        )
    elif style == "blind":
        turns.append(("Do the task directly.", steps, False))
    else:
        turns.append(("Now do the task.", steps, False))
    if variant >= 1 and verify:
        turns.append(("Check the result.", verify, False))
        if variant == 3:
            turns.append(("Check once more to be sure.", verify[-1:], False))
    turns.append(("The result looks right. The task is done.", [], True))
    turns.append(("Confirm: the task is complete.", [], True))
    return turns


class TeacherBackend(Backend):
    def __init__(self, plan: dict, variant: int, style: str = "careful"):
        self.turns = script(plan, variant, style)

    def prompt_tokens(self, messages) -> int:
        return sum(len(m["content"]) // 4 + 4 for m in messages)

    def complete(self, messages, seed, max_tokens, timeout=None) -> Completion:
        k = sum(1 for m in messages if m["role"] == "assistant")
        thought, cmds, done = self.turns[min(k, len(self.turns) - 1)]
        analysis = "Nothing done yet." if k == 0 else ("The task is complete." if done else "Continuing.")
        text = render_response(
            analysis, thought, [Command(c + "\n", 0.1) for c in cmds], done, reasoning=thought
        )
        return Completion(text, self.prompt_tokens(messages), len(text) // 4)
