"""Benchmark tasks: Terminal-Bench v1 and Harbor directories, loading, validation and grading.

Terminal-Bench v1 (`tb1`): task.yaml (instruction, max_agent_timeout_sec, max_test_timeout_sec),
Dockerfile (or docker-compose.yaml), run-tests.sh, tests/, solution.sh.

Harbor (`harbor`): task.toml ([agent] / [verifier] timeout_sec, [environment] docker_image, cpus,
memory_mb, storage_mb, allow_internet), instruction.md, environment/ (Dockerfile and its context),
tests/test.sh, solution/solve.sh.

A malformed task is reported with its file and field (TaskError) and skipped; the others run.
How tasks are graded: horizon.eval.grading.
"""

from __future__ import annotations

import json
import logging
import re
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from horizon.eval.sandbox import SandboxSpec

log = logging.getLogger("horizon.eval.tasks")

DEFAULT_AGENT_TIMEOUT = 900.0
DEFAULT_TEST_TIMEOUT = 180.0


class TaskError(ValueError):
    def __init__(self, task: str, file: str, field: str, message: str):
        super().__init__(f"task {task}: {file}: {field}: {message}")
        self.task, self.file, self.field, self.message = task, file, field, message


@dataclass
class Task:
    id: str
    path: str
    format: str  # tb1 | harbor
    instruction: str
    agent_timeout: float = DEFAULT_AGENT_TIMEOUT
    test_timeout: float = DEFAULT_TEST_TIMEOUT
    docker_image: str | None = None
    build_context: str | None = None  # a directory holding the Dockerfile
    workdir_files: str | None = None  # copied into /app for the local sandbox
    cpus: float = 1.0
    memory_mb: int = 2048
    storage_mb: int = 4096
    allow_internet: bool = False
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _num(task_id, file, key, value, default):
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise TaskError(task_id, file, key, f"expected a positive number, got {value!r}")
    return float(value)


def _size_mb(task_id, file, env: dict, key: str, default: int) -> int:
    """environment.{key}_mb (a number), or environment.{key} (a size such as '2G'), in MB."""
    if f"{key}_mb" in env:
        return int(_num(task_id, file, f"environment.{key}_mb", env[f"{key}_mb"], default))
    mem = env.get(key)
    if mem is None:
        return default
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", str(mem), re.I)
    if not m:
        raise TaskError(task_id, file, f"environment.{key}", f"expected e.g. '2G' or '512M', got {mem!r}")
    scale = {"": 1 / 2**20, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2}[m.group(2).upper()]
    return int(float(m.group(1)) * scale)


def load_tb1(path: str | Path) -> Task:
    path = Path(path)
    tid = path.name
    f = path / "task.yaml"
    if not f.exists():
        raise TaskError(tid, "task.yaml", "-", "missing")
    try:
        meta = yaml.safe_load(f.read_text()) or {}
    except yaml.YAMLError as e:
        raise TaskError(tid, "task.yaml", "-", f"not valid YAML ({e})") from None
    instruction = meta.get("instruction")
    if instruction is None and isinstance(meta.get("descriptions"), list):  # older TB1 layout
        base = [d for d in meta["descriptions"] if isinstance(d, dict) and d.get("key") == "base"]
        instruction = base[0].get("description") if base else None
    if not isinstance(instruction, str) or not instruction.strip():
        raise TaskError(tid, "task.yaml", "instruction", "missing or empty")
    if not (path / "run-tests.sh").exists():
        raise TaskError(tid, "run-tests.sh", "-", "missing")
    if not (path / "Dockerfile").exists() and not (path / "docker-compose.yaml").exists():
        raise TaskError(tid, "Dockerfile", "-", "missing (neither Dockerfile nor docker-compose.yaml)")
    return Task(
        id=tid, path=str(path), format="tb1", instruction=instruction.strip(),
        agent_timeout=_num(tid, "task.yaml", "max_agent_timeout_sec", meta.get("max_agent_timeout_sec"), DEFAULT_AGENT_TIMEOUT),
        test_timeout=_num(tid, "task.yaml", "max_test_timeout_sec", meta.get("max_test_timeout_sec"), DEFAULT_TEST_TIMEOUT),
        build_context=str(path) if (path / "Dockerfile").exists() else None,
        workdir_files=str(path / "app") if (path / "app").is_dir() else None,
        extra={k: meta[k] for k in ("difficulty", "category", "tags") if k in meta},
    )  # fmt: skip


def load_harbor(path: str | Path) -> Task:
    path = Path(path)
    tid = path.name
    f = path / "task.toml"
    if not f.exists():
        raise TaskError(tid, "task.toml", "-", "missing")
    try:
        meta = tomllib.loads(f.read_text())
    except tomllib.TOMLDecodeError as e:
        raise TaskError(tid, "task.toml", "-", f"not valid TOML ({e})") from None
    ins = path / "instruction.md"
    if not ins.exists() or not ins.read_text().strip():
        raise TaskError(tid, "instruction.md", "-", "missing or empty")
    if not (path / "tests" / "test.sh").exists():
        raise TaskError(tid, "tests/test.sh", "-", "missing")
    env = meta.get("environment", {}) or {}
    if not isinstance(env, dict):
        raise TaskError(tid, "task.toml", "environment", "expected a table")
    envdir = path / "environment"
    image = env.get("docker_image")
    if not image and not (envdir / "Dockerfile").exists():
        raise TaskError(
            tid, "task.toml", "environment.docker_image", "missing, and no environment/Dockerfile"
        )
    net = env.get("allow_internet")
    if net is None and "network_mode" in env:
        net = env["network_mode"] not in ("none", "no-network")
    return Task(
        id=tid, path=str(path), format="harbor", instruction=ins.read_text().strip(),
        agent_timeout=_num(tid, "task.toml", "agent.timeout_sec", (meta.get("agent") or {}).get("timeout_sec"), DEFAULT_AGENT_TIMEOUT),
        test_timeout=_num(tid, "task.toml", "verifier.timeout_sec", (meta.get("verifier") or {}).get("timeout_sec"), DEFAULT_TEST_TIMEOUT),
        docker_image=image,
        build_context=str(envdir) if (envdir / "Dockerfile").exists() else None,
        workdir_files=str(envdir / "files") if (envdir / "files").is_dir() else None,
        cpus=_num(tid, "task.toml", "environment.cpus", env.get("cpus"), 1.0),
        memory_mb=_size_mb(tid, "task.toml", env, "memory", 2048),
        storage_mb=_size_mb(tid, "task.toml", env, "storage", 4096),
        allow_internet=bool(net),
        extra={k: v for k, v in (meta.get("metadata") or {}).items() if isinstance(v, str | int | float | list)},
    )  # fmt: skip


LOADERS = {"tb1": load_tb1, "harbor": load_harbor}


def sandbox_spec(task: Task, name: str, labels: dict | None = None) -> SandboxSpec:
    """What a sandbox for this task needs: its files or image, and its resources."""
    return SandboxSpec(
        name=name,
        workdir_files=Path(task.workdir_files) if task.workdir_files else None,
        image=task.docker_image,
        dockerfile_dir=Path(task.build_context) if task.build_context else None,
        cpus=task.cpus,
        memory_mb=task.memory_mb,
        storage_mb=task.storage_mb,
        allow_internet=task.allow_internet,
        labels=labels or {},
    )


def load_benchmark(
    root: str | Path, fmt: str, only: list[str] | None = None
) -> tuple[list[Task], list[dict]]:
    """(tasks, errors): every task directory under root; malformed ones become errors, not crashes."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"benchmark directory {root} does not exist (see README: real benchmarks)")
    tasks, errors = [], []
    dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if only is not None:
        missing = sorted(set(only) - {p.name for p in dirs})
        if missing:
            raise FileNotFoundError(f"benchmark {root}: no task directories {', '.join(missing)}")
        dirs = [p for p in dirs if p.name in set(only)]
    for p in dirs:
        try:
            tasks.append(LOADERS[fmt](p))
        except TaskError as e:
            log.error("%s (skipped)", e)
            errors.append({"task": e.task, "file": e.file, "field": e.field, "message": e.message})
    return tasks, errors


def write_manifest(
    root: str | Path, fmt: str, out: str | Path, only: list[str] | None = None, name: str = ""
) -> dict:
    from horizon.io import write_json

    tasks, errors = load_benchmark(root, fmt, only)
    if not tasks:
        raise ValueError(f"benchmark {name or root}: no valid task ({len(errors)} malformed: {errors[:3]})")
    manifest = {
        "benchmark": name,
        "root": str(Path(root).resolve()),
        "format": fmt,
        "tasks": [t.to_dict() for t in tasks],
        "errors": errors,
    }
    write_json(out, manifest)
    log.info("benchmark %s: %d tasks, %d malformed", name or root, len(tasks), len(errors))
    return manifest


def read_manifest(path: str | Path) -> tuple[list[Task], list[dict]]:
    m = json.loads(Path(path).read_text())
    return [Task(**t) for t in m["tasks"]], m["errors"]
