"""Conversations both agent loops run: scripted model replies and scripted terminal outputs.

Each scenario exercises one prompt-turn kind (or one piece of context management); the suite runs
it through the published loop (reference_driver.py) and through ours, and compares every message
list sent to the model, byte for byte, and the keystrokes typed. The model and the terminal are
the scripted edges (FAKE model: a list of replies; a call whose history + prompt reaches `limit`
tokens overflows; tokens = sum(len(content) // 4 + 4)).
"""

from __future__ import annotations

import json

SCREEN0 = "Current Terminal Screen:\nroot@box:/app# \n" + "\n" * 38
PROMPT = "root@box:/app# "
BIG = "".join(f"{i:05d} ✓ 日本語 🚀 output line\n" for i in range(1200))  # ~40 kB, multi-byte


def ans(*keys: str, done=False, duration=0.1, **extra) -> dict:
    body = {"analysis": "a", "plan": "p", "commands": [{"keystrokes": k, "duration": duration} for k in keys]}
    if done:
        body["task_complete"] = True
    body.update(extra)
    return {"text": json.dumps(body)}


def new(text: str) -> str:
    return "New Terminal Output:\n" + text


def scenario(replies, outputs=(), **kw) -> dict:
    return {
        "instruction": "Write hello to /app/out.txt.",
        "limit": 10**6,
        "threshold": 8000,
        "output_limit": 4096,
        "max_episodes": 30,
        "outputs": [SCREEN0, *outputs] if outputs else [SCREEN0, new(PROMPT)],
        "screens": [PROMPT],
        "replies": list(replies),
        **kw,
    }


LS = new("root@box:/app# ls\nout.txt\nroot@box:/app# ")
CUT = {"length": '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "echo ' + "y" * 200}

TURNS = {
    "initial": scenario([ans("ls\n")]),
    "observation": scenario([ans("ls\n"), ans()], [LS]),
    "no-new-output": scenario([ans(), ans()], [new("\n" + PROMPT + "\n" * 38)]),
    "screen-fallback": scenario([ans("clear\n"), ans()], [SCREEN0]),
    "warnings": scenario(
        [{"text": '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n"}]}'}, ans()], [LS]
    ),
    "parse-error": scenario([{"text": "I cannot do that."}, ans("ls\n"), ans()], [LS]),
    "parse-error-warnings": scenario([{"text": 'Sure: {"analysis": "a", "plan": p}'}, ans()], [LS]),
    "output-too-long": scenario([CUT, ans("ls\n"), ans()], [LS]),
    "output-too-long-warnings": scenario([{"length": "Here: " + CUT["length"]}, ans("ls\n"), ans()], [LS]),
    "confirmation": scenario([ans("ls\n", done=True), ans(done=True)], [LS]),
    "confirmation-survives-parse-error": scenario([ans(done=True), {"text": "oops"}, ans(done=True)], [LS]),
    "confirmation-reset": scenario([ans(done=True), ans("ls\n"), ans(done=True), ans(done=True)], [LS]),
    "confirmation-drops-warnings": scenario([{"text": "ok " + ans(done=True)["text"]}, ans(done=True)], [LS]),
    "timeout": scenario(
        [ans("sleep 100\n", duration=5), ans()], [new("root@box:/app# sleep 100\n")], timeouts=[0]
    ),
    "long-output": scenario([ans("cat big\n"), ans("cat big\n", done=True), ans(done=True)], [new(BIG)]),
    "long-initial-screen": scenario([ans()], [LS], outputs_first=BIG),
    "durations": scenario([ans("a\n", "b\n", duration=90), ans("c\n", duration=-1), ans()], [LS]),
    "thinking-dropped": scenario(
        [{"text": "<think>\nlist {files}\n</think>\n\n" + ans("ls\n")["text"]}, ans()], [LS], reasoning=True
    ),
}

# Context management. Observations of ~9 kB make the history grow by ~2,250 tokens per episode.
OBS = [new(f"{c}" * 9000) for c in "abcdefgh"]
SUMMARY = [{"text": "SUMMARY of the work"}, {"text": "QUESTIONS 1-5"}, {"text": "ANSWERS 1-5"}]
LONG_CUT = {"length": "x" * 40000}  # an answer cut at the limit, far larger than the context

CONTEXT = {
    "proactive-summary": scenario(
        [ans("a\n"), ans("b\n"), ans("c\n"), *SUMMARY, ans("d\n"), ans()], OBS, limit=12000
    ),  # fmt: skip
    "proactive-summary-twice": scenario(
        [ans("a\n"), ans("b\n"), ans("c\n"), *SUMMARY, ans("d\n"), ans("e\n"), ans("f\n"), *SUMMARY, ans()],
        OBS,
        limit=12000,
    ),  # fmt: skip
    "overflow-after-cut-answer": scenario([ans("ls\n"), LONG_CUT, *SUMMARY, ans(), ans()], [LS], limit=9000),
    "overflow-summary-fails": scenario(
        [ans("ls\n"), LONG_CUT, {"fail": True}, {"text": "SHORT"}, ans(), ans()], [LS], limit=9000
    ),  # fmt: skip
    # harbor's fallback chain (terminal-bench would retry the failed call itself: an endpoint error,
    # an infrastructure error here; see differences.py)
    "overflow-all-summaries-fail": scenario(
        [ans("ls\n"), LONG_CUT, {"fail": True}, {"fail": True}, ans(), ans()],
        [LS],
        limit=9000,
        variants=("harbor",),
    ),
    "overflow-handoff-fails": scenario(
        [ans("ls\n"), LONG_CUT, *SUMMARY, {"fail": True}, ans(), ans()], [LS], limit=9000
    ),  # fmt: skip
}


def for_driver(sc: dict) -> dict:
    """The scenario as the reference driver takes it."""
    out = {k: v for k, v in sc.items() if k != "variants"}
    if "outputs_first" in out:
        out["outputs"] = [out.pop("outputs_first"), *out["outputs"][1:]]
    return out
