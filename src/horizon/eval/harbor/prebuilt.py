"""Docker: each task's image built once per Harbor job, and Harbor's trials started from it.

Harbor's docker environment runs `docker compose build` at every trial's start, and its build compose
file asks Compose to build again at `up` (`pull_policy: build`): two cached builds per trial, about a
third of a trial's start here. A task whose task.toml names `environment.docker_image` is started
from that image instead (Harbor's own prebuilt path: `image:` in place of `build:`; the environment
directory is not uploaded while it holds a Dockerfile, as with a build).

So before Harbor starts, the job builds each task's environment once (`docker build` of the same
context and Dockerfile that Compose would build) under a tag of its own, and hands Harbor a view of
the task: a copy of its directory under the job's directory whose task.toml names that tag. The
user's task directories are never written. The images are the job's: tagged with a key of the job's
directory (so that two jobs on one daemon never remove each other's), removed when it ends.

A task is passed to Harbor as it is when it already names an image, has no Dockerfile, brings its
own docker-compose.yaml (several services: Compose decides), or when its build fails here: Harbor
then builds it at each trial and records the failure there, as it would have.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

from horizon.eval.tasks.benchmark import Task

log = logging.getLogger("horizon.eval.harbor")

REPOSITORY = "horizon-harbor-task"  # not Harbor's hb__*: the job removes these by name


def _docker(env: dict, *args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["docker", *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout
    )


def image_tag(root: Path, task_dir: Path) -> str:
    """The job's tag for a task: the job's directory and the task's name, as Docker spells tags."""
    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:12]
    name = re.sub(r"[^a-z0-9_.-]", "-", task_dir.name.lower()).lstrip(".-")[:80] or "task"
    return f"{REPOSITORY}:{key}-{name}"


def buildable(task_dir: Path) -> str | None:
    """Why the task goes to Harbor as it is (None: it can start from an image built here)."""
    env = task_dir / "environment"
    if not (env / "Dockerfile").is_file():
        return "no environment/Dockerfile"
    if (env / "docker-compose.yaml").exists() or (env / "docker-compose.yml").exists():
        return "its own docker-compose file"
    try:
        config = tomllib.loads((task_dir / "task.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        return f"task.toml unreadable here ({e})"
    if (config.get("environment") or {}).get("docker_image"):
        return "it names its image"
    return None


def with_image(toml_text: str, tag: str) -> str | None:
    """task.toml naming `tag` as environment.docker_image (None when it cannot be done by adding one
    line: an inline or dotted environment table)."""
    line = f'docker_image = "{tag}"'
    lines = toml_text.splitlines()
    heads = [i for i, s in enumerate(lines) if s.strip() == "[environment]"]
    if heads:
        lines.insert(heads[0] + 1, line)
        text = "\n".join(lines) + "\n"
    else:
        text = toml_text.rstrip("\n") + f"\n\n[environment]\n{line}\n"
    try:
        ok = tomllib.loads(text).get("environment", {}).get("docker_image") == tag
    except tomllib.TOMLDecodeError:
        ok = False
    return text if ok else None


def _link_or_copy(src: str, dst: str) -> None:
    try:  # a task's data files are not copied for every job and repeat
        os.link(src, dst)
    except OSError:  # another filesystem
        shutil.copy2(src, dst)


def _view(task_dir: Path, views: Path, tag: str) -> Path | None:
    """The task directory again (its files hard links where the filesystem allows) with a task.toml of
    its own that names `tag` (None if task.toml cannot say so)."""
    text = with_image((task_dir / "task.toml").read_text(), tag)
    if text is None:
        return None
    view = views / task_dir.name
    if view.exists():
        shutil.rmtree(view)
    shutil.copytree(task_dir, view, symlinks=True, copy_function=_link_or_copy)
    (view / "task.toml").unlink()  # a link to the user's file: never written through
    (view / "task.toml").write_text(text)
    return view


def _build(env: dict, task_dir: Path, tag: str) -> str | None:
    """Build the task's image under `tag`; the error's tail, or None when it was built."""
    try:
        r = _docker(env, "build", "-q", "-t", tag, str(task_dir / "environment"), timeout=1800)
    except subprocess.TimeoutExpired:
        return "timed out after 1800 s"
    return None if r.returncode == 0 else (r.stderr or r.stdout).strip()[-300:]


@contextlib.contextmanager
def prebuilt_tasks(tasks: list[Task], root: Path, env: dict) -> Iterator[dict[str, str]]:
    """{task directory Harbor runs: task id}: the views of the tasks built here, the others as they
    are; the images built are removed when the job ends (however it ends)."""
    views, paths, built = root / "tasks", {}, []
    try:
        for t in tasks:
            task_dir = Path(t.path).resolve()
            tag = image_tag(root, task_dir)
            why = buildable(task_dir)
            if why is None and (failed := _build(env, task_dir, tag)) is not None:
                why = f"its image did not build here ({failed})"
            view = _view(task_dir, views, tag) if why is None else None
            if why is None:
                built.append(tag)
            if view is None:
                log.info("task %s: Harbor builds it at each trial (%s)", t.id, why or "task.toml")
            paths[str(view or task_dir)] = t.id
        yield paths
    finally:
        if built:
            r = _docker(env, "rmi", *built, timeout=600)
            if r.returncode != 0:
                log.warning("task images not removed: %s", r.stderr.strip()[-300:])
