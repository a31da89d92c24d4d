"""Rollout records (attempts.jsonl and transcripts/) as a rollout job writes them, for the DMPO tests."""

import json

from horizon.eval.settings import Attempt


def conversation(task: str, attempt: int, turns: int) -> list[dict]:
    msgs = [{"role": "user", "content": f"Task Description:\nsolve {task}\nCurrent terminal state:\n$"}]
    for t in range(turns):
        msgs.append(
            {"role": "assistant", "content": f'<think>\nstep {t} of {attempt}\n</think>\n\n{{"plan": "ls"}}'}
        )
        msgs.append({"role": "user", "content": f"New Terminal Output:\nout {t}"})
    return msgs  # ends with a user turn, as an attempt that ran out of episodes does


def write_attempts(root, outcomes: dict[str, list]) -> str:
    """attempts.jsonl + transcripts/ as a rollout job writes them; outcome True/False/'infra'."""
    lines = []
    for task, results in outcomes.items():
        for a, ok in enumerate(results):
            infra = ok == "infra"
            rec = Attempt(task, a, 0, ok is True, float(ok is True), 0 if infra else 2 + a, 10, 10, 1.0,
                          "infra_error" if infra else ("none" if ok is True else "tests_failed"), "completed")  # fmt: skip
            lines.append(json.dumps(rec.to_dict()))
            if not infra:
                t = root / "transcripts" / task / f"attempt-{a}.json"
                t.parent.mkdir(parents=True, exist_ok=True)
                t.write_text(json.dumps({**rec.to_dict(), "messages": conversation(task, a, 2 + a)}))
    (root / "attempts.jsonl").write_text("\n".join(lines) + "\n")
    return str(root / "attempts.jsonl")
