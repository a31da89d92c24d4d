"""FAKE corpora for the benchmarks: synthetic trajectories in the corpus schema, of chosen token lengths.

Not a stand-in for the real corpus's content: the text is random but shaped like it (a harness
prompt, reasoning, Terminus-2 JSON with shell commands, terminal output with listings, logs and
code), so tokenizers and models see realistic token mixes and lengths.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

WORDS = (
    "the file directory output error build test install package config run script python module line "
    "value check need first then next create update remove list count parse read write server port "
    "request response user data table column row index key path name version dependency compile link "
    "function class method return import from export variable string number array object status done"
).split()
COMMANDS = [
    "ls -la",
    "cat {f}",
    "grep -n {w} {f}",
    "python3 {f}",
    "make",
    "pip install {w}",
    "wc -l {f}",
    "sed -n 1,40p {f}",
    "find . -name '*.py'",
    "git status",
    "pytest -q",
    "head -20 {f}",
]
FILES = ["main.py", "config.yaml", "data.csv", "README.md", "src/app.py", "Makefile", "tests/test_app.py"]


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def _observation(rng: random.Random, chars: int) -> str:
    lines = [
        "New Terminal Output:",
        "root@box:/app# " + rng.choice(COMMANDS).format(f=rng.choice(FILES), w=rng.choice(WORDS)),
    ]
    while sum(len(x) + 1 for x in lines) < chars:
        kind = rng.random()
        if kind < 0.3:
            lines.append(
                f"-rw-r--r-- 1 root root {rng.randint(10, 99999):>6} Nov {rng.randint(1, 30):>2} "
                f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} {rng.choice(FILES)}"
            )
        elif kind < 0.6:
            lines.append(
                f"    {rng.choice(WORDS)}_{rng.choice(WORDS)} = {rng.choice(WORDS)}({rng.randint(0, 999)})"
            )
        elif kind < 0.8:
            lines.append(
                f"{rng.choice(['INFO', 'WARN', 'ERROR'])} [{rng.randint(1000, 9999)}] " + _sentence(rng, 8)
            )
        else:
            lines.append(f"{rng.choice(FILES)}:{rng.randint(1, 400)}: " + _sentence(rng, 6))
    lines.append("root@box:/app# ")
    return "\n".join(lines)


def _assistant(rng: random.Random, chars: int, done: bool) -> str:
    think = " ".join(_sentence(rng, rng.randint(6, 18)) for _ in range(max(1, chars // 200)))
    cmds = [
        {
            "keystrokes": rng.choice(COMMANDS).format(f=rng.choice(FILES), w=rng.choice(WORDS)) + "\n",
            "duration": rng.choice([0.1, 0.5, 1.0, 5.0]),
        }
        for _ in range(rng.randint(0 if done else 1, 3))
    ]
    body = {
        "analysis": _sentence(rng, 12),
        "plan": _sentence(rng, 10),
        "commands": cmds,
        "task_complete": done,
    }
    return f"<think>\n{think}\n</think>\n\n" + json.dumps(body, indent=2)


def trajectory(rng: random.Random, target_tokens: int, task: str, chars_per_token: float = 3.6) -> dict:
    """One completed trajectory of about `target_tokens` tokens (Qwen vocabulary)."""
    budget = int(target_tokens * chars_per_token)
    prompt = (
        "You are an agent solving a task in a Linux terminal. Answer with one JSON object. "
        + " ".join(_sentence(rng, 14) for _ in range(12))
        + f"\n\nTask Description:\n{_sentence(rng, 30)}\n\nCurrent terminal state:\nroot@box:/app# \n"
    )
    conv = [{"role": "user", "content": prompt}]
    used = len(prompt)
    while used < budget - 1500:
        a = _assistant(rng, rng.randint(300, 1600), done=False)
        o = _observation(rng, rng.randint(200, 4000))
        conv += [{"role": "assistant", "content": a}, {"role": "user", "content": o}]
        used += len(a) + len(o)
    conv.append({"role": "assistant", "content": _assistant(rng, 300, done=True)})
    conv.append(
        {
            "role": "user",
            "content": "Current terminal state:\nroot@box:/app# \n\nAre you sure you want to "
            "mark the task as complete? Answer with task_complete true again.",
        }
    )
    conv.append({"role": "assistant", "content": _assistant(rng, 200, done=True)})
    return {
        "conversations": conv,
        "task": task,
        "agent": "synthetic",
        "model": "synthetic",
        "episode": f"episode-{len(conv) // 2}",
        "enable_thinking": True,
    }


def corpus(n: int, seed: int = 0, min_tokens: int = 2000, max_tokens: int = 40000) -> Iterator[dict]:
    rng = random.Random(seed)
    for i in range(n):
        yield trajectory(rng, rng.randint(min_tokens, max_tokens), task=f"synthetic_{i:06d}")
