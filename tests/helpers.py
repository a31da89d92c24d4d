"""Helpers shared by the tests: paths, small configs, running Snakemake like a user does."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
CORPUS_SAMPLE = FIXTURES / "corpus-sample.jsonl"
BIN = Path(sys.executable).parent


def fixture_rows() -> list[dict]:
    return [json.loads(line) for line in CORPUS_SAMPLE.read_text().splitlines() if line.strip()]


def fixture_texts() -> list[str]:
    return [m["content"] for r in fixture_rows() for m in r["conversations"]]


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
    cfg["eval"].update(include_base=False, concurrency=2)
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


def same_terminal(x: str, y: str) -> bool:
    """Two runs' captures of one terminal that differ only by timing: the same characters merged in
    another order (two processes writing at once, whose writes can interleave inside a line), or one
    capture the start of the other (taken before the shell had echoed or printed everything)."""

    def text(obs: str) -> str:
        return "\n".join(line.rstrip() for line in obs.splitlines()).rstrip()

    a, b = sorted((text(x), text(y)), key=len)
    return Counter(x) == Counter(y) or b.startswith(a)
