"""Docker under Harbor: the task images a job builds once, and the views of the tasks that name them.
The daemon is replaced here by a recorder (`docker_cli`); tests/engines/test_harbor_engine.py runs the
real one, and bench/harbor_overhead.py compares the attempts."""

import json
import re
import shutil
import tomllib
from pathlib import Path

import pytest

from horizon.eval.harbor import job, prebuilt
from horizon.eval.harbor.prebuilt import buildable, image_tag, prebuilt_tasks, with_image
from horizon.eval.tasks.benchmark import load_benchmark
from tests.helpers import HARBOR_RUN_TASKS


class Daemon:
    """Records the docker commands and holds the tags that `compose build` made (and `tags` given);
    `fail` names the tasks whose build fails."""

    def __init__(self, fail=(), tags=()):
        self.calls, self.fail, self.tags = [], set(fail), set(tags)

    def __call__(self, env, *args, timeout):
        self.calls.append(args)
        out, bad = "", False
        if args[0] == "compose":
            spec = json.loads(Path(args[args.index("-f") + 1]).read_text())["services"]["main"]
            bad = Path(spec["build"]["context"]).parent.name in self.fail
            if not bad:
                self.tags.add(spec["image"])
        elif args[0] == "images":
            out = "\n".join(sorted(self.tags))
        elif args[0] == "rmi":
            self.tags -= set(args[1:])
        return type(
            "R", (), {"returncode": int(bad), "stdout": out, "stderr": "no base image" if bad else ""}
        )

    def ran(self, verb):
        return [c for c in self.calls if verb in c]


@pytest.fixture
def tasks(tmp_path):
    shutil.copytree(HARBOR_RUN_TASKS, tmp_path / "tasks")
    found, errors = load_benchmark(tmp_path / "tasks", "harbor")
    assert not errors and len(found) == 2
    return found


def by_name(tasks, name):
    return next(t for t in tasks if Path(t.path).name == name)


def test_a_view_names_the_jobs_image_and_the_users_task_is_untouched(tmp_path, tasks, monkeypatch):
    daemon = Daemon()
    monkeypatch.setattr(prebuilt, "docker_cli", daemon)
    before = {t.id: (Path(t.path) / "task.toml").read_bytes() for t in tasks}
    root = tmp_path / "job"
    with prebuilt_tasks(tasks, root, {}) as paths:
        assert sorted(paths.values()) == sorted(t.id for t in tasks)
        for path, tid in paths.items():
            view, original = Path(path), Path(next(t.path for t in tasks if t.id == tid))
            assert view.parent == root / "tasks" and view.name == original.name
            config = tomllib.loads((view / "task.toml").read_text())
            assert config["environment"]["docker_image"] == image_tag(root, original.resolve())
            assert config["environment"]["cpus"] == 1  # the rest of task.toml kept
            # every other file is the task's own (linked where the filesystem allows)
            assert (view / "tests/test.sh").read_bytes() == (original / "tests/test.sh").read_bytes()
        assert len(daemon.ran("build")) == 2 and len(daemon.tags) == 2  # through Compose: Harbor's builder
    assert {t.id: (Path(t.path) / "task.toml").read_bytes() for t in tasks} == before  # never written through
    assert daemon.ran("rmi") and daemon.tags == set()  # both images removed at the end


def test_a_task_whose_build_fails_here_goes_to_harbor_as_it_is(tmp_path, tasks, monkeypatch):
    daemon = Daemon(fail={"greet"})
    monkeypatch.setattr(prebuilt, "docker_cli", daemon)
    with prebuilt_tasks(tasks, tmp_path / "job", {}) as paths:
        greet = by_name(tasks, "greet")
        assert paths[str(Path(greet.path).resolve())] == greet.id  # Harbor builds it at each trial
    built = image_tag(tmp_path / "job", Path(by_name(tasks, "count-words").path).resolve())
    assert daemon.ran("rmi") == [("rmi", built)]  # only what was built is removed


def test_a_task_that_cannot_be_viewed_goes_to_harbor_as_it_is(tmp_path, tasks, monkeypatch):
    monkeypatch.setattr(prebuilt, "docker_cli", Daemon())
    greet = by_name(tasks, "greet")
    (Path(greet.path) / "tests" / "gone").symlink_to(tmp_path / "nowhere")  # a dangling link
    with prebuilt_tasks(tasks, tmp_path / "job", {}) as paths:
        assert paths[str(Path(greet.path).resolve())] == greet.id
    assert not (tmp_path / "job" / "tasks" / "greet").exists()


def test_a_resumed_job_keeps_each_tasks_first_choice(tmp_path, tasks, monkeypatch):
    """Another task directory in the config would start the job afresh (its finished trials set aside)."""
    root = tmp_path / "job"
    monkeypatch.setattr(prebuilt, "docker_cli", Daemon(fail={"greet"}))
    with prebuilt_tasks(tasks, root, {}) as first:
        (root / "job").mkdir()  # the Harbor job, killed before it ended
        (root / "job.json").write_text(json.dumps({"tasks": [{"path": p} for p in first]}))
    monkeypatch.setattr(prebuilt, "docker_cli", Daemon())  # greet would build now: it stays as it was
    with prebuilt_tasks(tasks, root, {}) as again:
        assert again == first
    monkeypatch.setattr(prebuilt, "docker_cli", Daemon(fail={"greet", "count-words"}))
    with pytest.raises(prebuilt.PrebuildError, match="count-words.*started it from its image"):
        with prebuilt_tasks(tasks, root, {}):
            pass


def test_tasks_harbor_must_build_itself(tmp_path):
    task = tmp_path / "t"
    (task / "environment").mkdir(parents=True)
    (task / "task.toml").write_text('version = "1.0"\n')
    assert buildable(task) == "no environment/Dockerfile"
    (task / "environment/Dockerfile").write_text("FROM x\n")
    assert buildable(task) is None
    (task / "task.toml").write_text('[environment]\ndocker_image = "mine:1"\n')
    assert buildable(task) == "it names its image"
    (task / "task.toml").write_text('version = "1.0"\n')
    (task / "environment/docker-compose.yaml").write_text("services: {}\n")
    assert buildable(task) == "its own docker-compose file"


@pytest.mark.parametrize(
    "toml, ok",
    [
        ('version = "1.0"\n', True),  # no [environment]: one is added
        ("[environment]\ncpus = 2\n\n[verifier]\ntimeout_sec = 5.0\n", True),
        ("environment = { cpus = 2 }\n", False),  # an inline table cannot take a line
        ("environment.cpus = 2\n", False),  # nor a dotted key
    ],
)
def test_the_image_goes_into_task_toml_or_the_task_is_left_alone(toml, ok):
    text = with_image(toml, "horizon-harbor-task:abc-t")
    if not ok:
        assert text is None
        return
    parsed, before = tomllib.loads(text), tomllib.loads(toml)
    assert parsed["environment"]["docker_image"] == "horizon-harbor-task:abc-t"
    parsed["environment"].pop("docker_image")
    assert parsed == {**before, "environment": before.get("environment", {})}


def test_two_jobs_and_two_tasks_tag_their_images_apart_in_names_docker_accepts(tmp_path):
    a, b = (
        image_tag(tmp_path / "r0/harbor", Path("Fix_Git")),
        image_tag(tmp_path / "r1/harbor", Path("Fix_Git")),
    )
    assert a != b and a.startswith(f"{prebuilt.REPOSITORY}:") and "-fix_git-" in a
    assert image_tag(tmp_path / "j", Path("Foo")) != image_tag(tmp_path / "j", Path("foo"))  # one tag each
    assert image_tag(tmp_path / "j", Path("a b")) != image_tag(tmp_path / "j", Path("a-b"))
    tag = image_tag(tmp_path / "j", Path(".hidden" + "x" * 200)).split(":", 1)[1]
    assert re.fullmatch(r"[a-z0-9_][a-z0-9_.-]{0,127}", tag)  # Docker's grammar of a tag


def test_the_images_the_jobs_trials_built_are_removed_and_no_others(tmp_path, monkeypatch):
    """With `delete: false` every trial that builds leaves a tag Compose names after its project."""
    (tmp_path / "job" / "greet__AbC").mkdir(parents=True)  # a trial of this job
    daemon = Daemon(tags={"greet__abc__env-main:latest", "greet__xyz__env-main:latest", "python:3.12"})
    monkeypatch.setattr(job, "docker_cli", daemon)  # rmi
    monkeypatch.setattr(prebuilt, "docker_cli", daemon)  # images (prebuilt.images)
    with job.job_images({}, tmp_path / "job"):
        daemon.tags.add("hb__count-words:1")  # a name Harbor gives its own build, made during the job
    assert daemon.tags == {"greet__xyz__env-main:latest", "python:3.12"}  # another job's trial, not ours


def test_a_view_holds_what_a_relative_link_out_of_the_task_points_to(tmp_path, tasks, monkeypatch):
    monkeypatch.setattr(prebuilt, "docker_cli", Daemon())
    greet = Path(by_name(tasks, "greet").path)
    (tmp_path / "shared.txt").write_text("data the task links to\n")
    (greet / "tests" / "shared.txt").symlink_to(Path("../../../shared.txt"))
    assert (greet / "tests" / "shared.txt").read_text() == "data the task links to\n"
    with prebuilt_tasks(tasks, tmp_path / "job", {}) as paths:
        view = next(Path(p) for p, tid in paths.items() if Path(p).name == "greet")
        assert (
            view != greet.resolve()
            and (view / "tests" / "shared.txt").read_text() == "data the task links to\n"
        )
