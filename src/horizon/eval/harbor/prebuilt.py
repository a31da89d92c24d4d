"""Docker: each task's image built once per Harbor job, and Harbor's trials started from it.

Harbor's docker environment runs `docker compose build` at every trial's start, and its build compose
file asks Compose to build again at `up` (`pull_policy: build`): two cached builds per trial, about a
third of a trial's start here. A task whose task.toml names `environment.docker_image` is started
from that image instead (Harbor's own prebuilt path: `image:` in place of `build:`; the environment
directory is not uploaded while it holds a Dockerfile, as with a build).

So before Harbor starts, the job builds each task's environment once, through Docker Compose as
Harbor would (the same builder, BuildKit, and the same context and Dockerfile), under a tag of its
own, and hands Harbor a view of the task: the task directory again under the job's directory (its
files hard links where the filesystem allows), with a task.toml of its own naming that tag. The
user's task directories are never written. The images are the job's: tagged with a key of the job's
directory and of the task's name (two jobs on one daemon never remove each other's, two tasks never
share a tag), removed when it ends.

A task goes to Harbor as it is when it already names an image, has no Dockerfile, brings its own
docker-compose.yaml (several services: Compose decides), cannot be viewed, or does not build here:
Harbor then builds it at each trial and records the failure there, as it would have. A resumed job
keeps each task's first choice (the job's config names the directories Harbor runs, and another
config would start the job afresh): a task that started from its image before must build again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
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


class PrebuildError(RuntimeError):
    """A task that a resumed Harbor job started from its image no longer builds."""


def docker_cli(env: dict, *args: str, timeout: float) -> subprocess.CompletedProcess:
    """The docker CLI under the job's environment (job.compose_env: its Compose plugin), output as text."""
    return subprocess.run(
        ["docker", *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout
    )


def images(env: dict, *filters: str) -> set[str]:
    """The images the daemon holds now, as repository:tag (an empty set when docker cannot tell)."""
    args = [a for f in filters for a in ("--filter", f)]
    try:
        out = docker_cli(env, "images", *args, "--format", "{{.Repository}}:{{.Tag}}", timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return set(out.stdout.split()) if out.returncode == 0 else set()


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def image_tag(root: Path, task_dir: Path) -> str:
    """The job's tag for a task: keys of the job's directory and of the task's name (kept readable)."""
    name = re.sub(r"[^a-z0-9_.-]", "-", task_dir.name.lower()).lstrip(".-")[:60] or "task"
    return f"{REPOSITORY}:{_key(str(root.resolve()))}-{name}-{_key(task_dir.name)[:8]}"


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
    real = os.path.realpath(src)  # the file a link points to: a relative link may leave the task's directory
    try:  # a task's data files are not copied for every job and repeat
        os.link(real, dst)
    except OSError:  # another filesystem; a dangling link fails here too
        shutil.copy2(real, dst)


def make_view(task_dir: Path, view: Path, tag: str) -> str | None:
    """The task directory again at `view` with a task.toml of its own that names `tag`; why not, or None."""
    text = with_image((task_dir / "task.toml").read_text(), tag)
    if text is None:
        return "task.toml cannot name an image by adding a line (an inline or dotted environment table)"
    try:
        if view.exists():
            shutil.rmtree(view)
        shutil.copytree(task_dir, view, copy_function=_link_or_copy)
        (view / "task.toml").unlink()  # a link to the user's file: never written through
        (view / "task.toml").write_text(text)
    except OSError as e:  # a dangling link, a socket, an unreadable file
        shutil.rmtree(view, ignore_errors=True)
        return f"its directory cannot be viewed ({e})"
    return None


def build(env: dict, t: Task, tag: str, compose_dir: Path) -> str | None:
    """Build the task's image under `tag` through Compose (Harbor's builder); the error, or None."""
    task_dir = Path(t.path).resolve()
    compose_dir.mkdir(parents=True, exist_ok=True)
    spec = compose_dir / f"{task_dir.name}.json"  # JSON is YAML: Compose reads it
    spec.write_text(
        json.dumps(
            {"services": {"main": {"build": {"context": str(task_dir / "environment")}, "image": tag}}}
        )
    )
    argv = ["compose", "-p", f"horizon-prebuild-{_key(tag)}", "-f", str(spec), "build"]
    try:
        r = docker_cli(env, *argv, timeout=t.build_timeout)
    except subprocess.TimeoutExpired:
        return f"did not build within the task's build_timeout_sec ({t.build_timeout:g} s)"
    return None if r.returncode == 0 else (r.stderr or r.stdout).strip()[-300:]


def choose(t: Task, root: Path, env: dict, before: set[str] | None) -> tuple[str, str | None]:
    """(the directory Harbor runs for task t, why it is the task's own or None); builds the image.
    `before`: the directories of the job being resumed (None: a new job)."""
    task_dir = Path(t.path).resolve()
    view, tag = root / "tasks" / task_dir.name, image_tag(root, task_dir)
    if before is not None and str(task_dir) in before:
        return str(task_dir), "as in the job being resumed"
    must = before is not None and str(view) in before
    why = buildable(task_dir) or build(env, t, tag, root / "prebuild")
    why = why or make_view(task_dir, view, tag)
    if why is not None and must:
        raise PrebuildError(
            f"task {t.id}: the Harbor job being resumed ({root / 'job'}) started it from its image, "
            f"which cannot be made again: {why}; fix it, or remove {root} to start the job afresh"
        )
    return (str(task_dir), why) if why is not None else (str(view), None)


def _before(root: Path) -> set[str] | None:
    """The task directories of the job in root/job, if one is there to resume."""
    try:
        cfg = json.loads((root / "job.json").read_text())
    except (OSError, ValueError):
        return None
    return {str(x.get("path")) for x in cfg.get("tasks", [])} if (root / "job").is_dir() else None


@contextlib.contextmanager
def prebuilt_tasks(tasks: list[Task], root: Path, env: dict) -> Iterator[dict[str, str]]:
    """{task directory Harbor runs: task id}: the views of the tasks built here, the others as they
    are; the images built are removed when the job ends (however it ends)."""
    paths: dict[str, str] = {}
    before = _before(root)
    try:
        for t in tasks:
            path, why = choose(t, root, env, before)
            if why is not None:
                log.info("task %s: Harbor builds it at each trial (%s)", t.id, why)
            paths[path] = t.id
        yield paths
    finally:
        tags = {image_tag(root, Path(t.path).resolve()) for t in tasks}
        built = sorted(tags & images(env, f"reference={REPOSITORY}"))
        if built and (r := docker_cli(env, "rmi", *built, timeout=600)).returncode != 0:
            log.warning("task images not removed: %s", r.stderr.strip()[-300:])
