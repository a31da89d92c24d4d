"""A Terminal-Bench v1 task's docker-compose.yaml, read as terminal-bench 0.2.18 uses it.

terminal-bench builds and starts the compose project with its `T_BENCH_*` variables in the
environment (the client container's name and image, the logs paths, `T_BENCH_TEST_DIR=/tests`);
the task's compose file maps them into the container (`TEST_DIR=${T_BENCH_TEST_DIR}`). What a
single-container sandbox takes from it: the build context and Dockerfile of the agent's service
(`client`, else the only one), its prebuilt `image` when it names one that is not a `T_BENCH_*`
variable, its environment with the variables expanded, and its CPU limit. A project of several
services (a database beside the client) cannot run in one container: `Compose.services` names them
and the sandboxes report the task unsupported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

# the variables terminal-bench puts in the compose environment (host paths stand for the logs mounts)
T_BENCH = {
    "T_BENCH_TEST_DIR": "/tests",
    "T_BENCH_CONTAINER_LOGS_PATH": "/logs",
    "T_BENCH_CONTAINER_AGENT_LOGS_PATH": "/agent-logs",
    "T_BENCH_TASK_LOGS_PATH": "/logs",
    "T_BENCH_TASK_AGENT_LOGS_PATH": "/agent-logs",
}
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


class ComposeError(ValueError):
    pass


@dataclass
class Compose:
    services: list[str]
    service: str  # the agent's container
    context: str | None = None  # build context, relative to the task directory
    dockerfile: str = "Dockerfile"
    image: str | None = None
    environment: dict[str, str] = field(default_factory=dict)
    cpus: float | None = None


def _sub(text: str, names: dict[str, str]) -> str:
    return _VAR.sub(lambda m: names.get(m.group(1) or m.group(3), m.group(2) or ""), str(text))


def task_names(task_id: str) -> dict[str, str]:
    """The T_BENCH_* values of one task (names as terminal-bench forms them)."""
    prefix = f"tb__{task_id.replace('.', '-')}"
    return {
        **T_BENCH,
        "T_BENCH_TASK_DOCKER_NAME_PREFIX": prefix,
        "T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME": f"{prefix}__client",
        "T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME": f"{prefix}__client",
    }


def _environment(raw) -> dict[str, str]:
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return {str(k): "" if v is None else str(v) for k, v in raw.items()}
    if isinstance(raw, list):
        out = {}
        for item in raw:
            k, _, v = str(item).partition("=")
            out[k] = v
        return out
    raise ComposeError(f"environment: expected a list or a mapping, got {type(raw).__name__}")


def read(path: str | Path, task_id: str) -> Compose:
    """The agent's service of a docker-compose.yaml; ComposeError names what is wrong."""
    try:
        doc = yaml.safe_load(Path(path).read_text()) or {}
    except yaml.YAMLError as e:
        raise ComposeError(f"not valid YAML ({e})") from None
    services = doc.get("services") if isinstance(doc, dict) else None
    if not isinstance(services, dict) or not services:
        raise ComposeError("services: missing or empty")
    name = "client" if "client" in services else next(iter(services))
    svc = services[name] or {}
    names = task_names(task_id)
    build = svc.get("build")
    context, dockerfile = None, "Dockerfile"
    if isinstance(build, str):
        context = build
    elif isinstance(build, dict):
        context, dockerfile = str(build.get("context", ".")), str(build.get("dockerfile", "Dockerfile"))
    image = svc.get("image")
    image = None if image is None or "T_BENCH_" in str(image) else _sub(image, names)
    env = {k: _sub(v, names) for k, v in _environment(svc.get("environment")).items()}
    limits = ((svc.get("deploy") or {}).get("resources") or {}).get("limits") or {}
    cpus = float(limits["cpus"]) if "cpus" in limits else None
    return Compose(list(services), name, context, dockerfile, image, env, cpus)
