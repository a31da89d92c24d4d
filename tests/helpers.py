"""Helpers shared by the tests: paths, small configs, running Snakemake like a user does."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
CORPUS_SAMPLE = FIXTURES / "corpus-sample.jsonl"
BIN = Path(sys.executable).parent


def wait_for(condition: Callable[[], object], what: str, timeout: float = 60, poll: float = 0.05):
    """Poll `condition` until it returns something true (returned) or `timeout` s pass (a failure
    naming `what`): a test waits for the state it checks, never a fixed time."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"after {timeout:g} s still waiting for {what} (last seen: {value!r})")
        time.sleep(poll)


def fixture_rows() -> list[dict]:
    return [json.loads(line) for line in CORPUS_SAMPLE.read_text().splitlines() if line.strip()]


def fixture_texts() -> list[str]:
    return [m["content"] for r in fixture_rows() for m in r["conversations"]]


TINY_BUILD = {
    "vocab_size": 400, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "max_position_embeddings": 2048,
}  # fmt: skip


def build_tiny_corpus(d: Path) -> Path:
    """The fixture corpus under `d`: normalized, a tiny offline student (tokenizer and model), tokenized
    (library calls, no Snakemake); the `tiny_corpus` fixture."""
    from horizon.data.normalize import normalize
    from horizon.data.sources import download
    from horizon.data.student import build_tiny
    from horizon.data.tokens import tokenize_shard

    download(str(CORPUS_SAMPLE), d / "raw")
    normalize(d / "raw/manifest.json", d / "traj.parquet", d / "q.parquet", d / "stats.json")
    build_tiny(d / "traj.parquet", d / "student", TINY_BUILD, seed=0)
    tokenize_shard(d / "traj.parquet", d / "student", d / "tokens.parquet", 0, 1)
    return d


def deep_update(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = deep_update(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


# Settings records carry no defaults (the schema is their only home): tests build them as the workflow
# does, from a config section with the schema's defaults filled, plus the test's own values.


def eval_settings(**over):
    """EvalSettings from config `eval:` at the schema's defaults, `over` merged in (nested dicts too)."""
    from horizon.config import section_defaults
    from horizon.eval.settings import EvalSettings

    return EvalSettings.from_config(section_defaults("eval", over))


def judge_settings(**over):
    """JudgeSettings from config `judge:` at the schema's defaults, with `over`."""
    from horizon.config import section_defaults
    from horizon.data.judge import JudgeSettings

    return JudgeSettings.from_config(section_defaults("judge", over))


def synth_settings(**over):
    """SynthSettings from config `synth:` at the schema's defaults, with `over` (resources merged in)."""
    from horizon.config import section_defaults
    from horizon.synth.cascade import SynthSettings

    return SynthSettings.from_config(section_defaults("synth", over))


def write_config(path: Path, cfg: dict) -> Path:
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def snakemake(
    args: list[str], cwd: Path | None = None, check: bool = True, timeout: int = 1800, env: dict | None = None
) -> subprocess.CompletedProcess:
    cmd = [str(BIN / "snakemake"), "-s", str(REPO / "Snakefile"), *args]
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(cmd, cwd=cwd or REPO, capture_output=True, text=True, timeout=timeout, env=full_env)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
        )
    return proc


def job_counts(output: str) -> dict[str, int]:
    """Per-rule job counts from Snakemake's 'Job stats' table."""
    block = output.split("Job stats:", 1)[1]
    counts = {}
    for line in block.splitlines():
        m = re.match(r"^(\S+)\s+(\d+)$", line.strip())
        if m and m.group(1) != "total":
            counts[m.group(1)] = int(m.group(2))
        elif line.startswith("total"):
            break
    return counts


DEMO_TASKS = ["count-rows", "run-script", "fix-bug", "write-report"]


def demo_config(workdir: Path) -> Path:
    """The demo's config with its repository paths made absolute, so the workflow can run (or dry-run)
    in another directory than the repository's, whatever results/ the repository holds."""
    cfg = yaml.safe_load((REPO / "demo" / "config.yaml").read_text())
    cfg["eval"]["benchmarks"]["demo"]["path"] = str(REPO / "demo" / "tasks")
    cfg["eval"]["prompt_template"] = str(REPO / "demo" / "prompt.yaml")
    return write_config(Path(workdir) / "config.yaml", cfg)


def tiny_demo_config(workdir: Path, teachers: bool = False, **overrides) -> Path:
    """The demo config made smaller (4 tasks, no base model) with absolute paths:
    the same rules, for tests that run the workflow several times (Slurm, crash safety).
    Without `teachers`: the study's teacher only, and the paper's three selections (no TOR)."""
    cfg = yaml.safe_load((REPO / "demo" / "config.yaml").read_text())
    if not teachers and cfg["corpus"].get("sources"):
        study = next(iter(cfg["corpus"]["sources"].values()))
        cfg["corpus"] = {"source": study["source"], "collect": study["collect"]}
        cfg["refine"]["selections"] = ["top", "bottom", "random"]
    cfg["eval"]["benchmarks"]["demo"].update(path=str(REPO / "demo" / "tasks"), tasks=DEMO_TASKS)
    cfg["eval"]["prompt_template"] = str(REPO / "demo" / "prompt.yaml")
    cfg["student"]["build"].update(vocab_size=600)
    cfg["train"].update(epochs=40, save_steps=10)  # 16 trajectories: more epochs for as many steps
    # the terminal read when idle: a run's captures do not depend on how loaded the machine is
    cfg["eval"].update(include_base=False, concurrency=2, capture="idle")
    cfg["eval"]["sampling"]["max_tokens"] = 160
    cfg["report"]["paired"] = [["single-K384", "refine-H640-top-50"]]
    cfg["dmpo"].update(enabled=False)  # the tests that want DMPO enable it
    cfg["dmpo"]["tasks"]["path"] = str(REPO / "demo" / "train-tasks")
    cfg = deep_update(cfg, overrides)
    return write_config(Path(workdir) / "config.yaml", cfg)


def compile_latex(table_tex: str, workdir: Path) -> subprocess.CompletedProcess:
    """pdflatex on a document holding one generated table (as a user pastes it into a paper)."""
    doc = (
        "\\documentclass{article}\\usepackage[utf8]{inputenc}\\usepackage[T1]{fontenc}\\usepackage{booktabs}"
        "\\begin{document}\n" + table_tex + "\n\\end{document}\n"
    )
    (workdir / "doc.tex").write_text(doc)
    return subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )


# two tasks both harnesses run (tests/engines/test_harbor_engine.py, bench/harbor_overhead.py)
HARBOR_RUN_TASKS = FIXTURES / "harbor-run"


DIAGNOSTIC = re.compile(r"[\w.+-]+: \S")  # "bash: te: command not found", "wc: invalid option -- 'p'"


def interleaved(x: str, y: str, max_lines: int = 12) -> bool:
    """Two captures of one terminal that differ only as two processes writing to it at once can make them
    differ: outside one block the same lines; inside it, the same lines merged in another order from two
    sequences, each a process's output starting with its diagnostic ("name: ..."). A line that changed,
    went missing or is new, a capture cut short, and one process's own lines reordered (a `sort` that lost
    its locale) are not explained by that."""
    a, b = x.rstrip().splitlines(), y.rstrip().splitlines()
    if a == b or len(a) != len(b):
        return False
    start = next(i for i, (u, v) in enumerate(zip(a, b)) if u != v)
    end = len(a) - next(i for i, (u, v) in enumerate(zip(reversed(a), reversed(b))) if u != v)
    # the block where the two outputs merge may begin before the first line that differs; either capture
    # may hold the lines whole (the other one a diagnostic written in pieces)
    return any(
        _two_outputs(a[s:end], b[s:end]) or _two_outputs(b[s:end], a[s:end])
        for s in range(start, max(-1, end - max_lines - 1), -1)
    )


def _two_outputs(block: list[str], other: list[str]) -> bool:
    """`block` and `other` are two merges of the same two line sequences, each starting with a diagnostic."""
    for mask in range(1, (1 << len(block)) - 1):  # which lines of the block one process wrote
        p = [line for i, line in enumerate(block) if mask >> i & 1]
        q = [line for i, line in enumerate(block) if not mask >> i & 1]
        if DIAGNOSTIC.match(p[0]) and DIAGNOSTIC.match(q[0]):
            if _merge_of(other, p, q) or (len(block) <= CHUNKED_LINES and _chunks_of(other, p, q)):
                return True
    return False


# A diagnostic is written in several write() calls (coreutils' error(): "tail: ", the message, "\n"), so
# the other process's output can land inside one of its lines: seen as "tail: wc: invalid option -- 'p'"
# in a resumed run where the reference showed the two processes' lines whole. Such merges are checked on
# the characters, in a few chunks (MAX_CHUNK_SWITCHES), on blocks of a few lines only.
CHUNKED_LINES = 6
MAX_CHUNK_SWITCHES = 4


def _chunks_of(lines: list[str], p: list[str], q: list[str]) -> bool:
    """Whether `lines` is the text of p and the text of q merged in at most a few chunks, each process's
    characters in their own order."""
    text, a, b = ("".join(x + "\n" for x in seq) for seq in (lines, p, q))
    if len(text) != len(a) + len(b):
        return False
    best = {(0, 0): 0, (0, 1): 0}  # (characters of a used, which process wrote the last one): switches
    for k, ch in enumerate(text):
        nxt: dict[tuple[int, int], int] = {}
        for (i, last), sw in best.items():
            j = k - i
            for who, pos, src in ((0, i, a), (1, j, b)):
                if pos < len(src) and src[pos] == ch:
                    key, cost = (i + (who == 0), who), sw + (who != last)
                    if cost <= MAX_CHUNK_SWITCHES and cost < nxt.get(key, cost + 1):
                        nxt[key] = cost
        best = nxt
    return any(i == len(a) for i, _ in best)


def _merge_of(lines: list[str], p: list[str], q: list[str]) -> bool:
    """Whether `lines` is p and q merged, each in its own order."""
    ok = {(0, 0)}
    for line in lines:
        ok = {(i + 1, j) for i, j in ok if i < len(p) and p[i] == line} | {
            (i, j + 1) for i, j in ok if j < len(q) and q[j] == line
        }
    return (len(p), len(q)) in ok


def checkpoint_written(state: Path) -> bool:
    """A checkpoint's trainer_state.json written to the end: transformers writes it last and not at
    once, so a kill can land inside its write (the product then treats the checkpoint as incomplete)."""
    try:
        json.loads(state.read_text())
    except (OSError, ValueError):
        return False
    return True
