"""Docker under Harbor: the task images a job builds once, and the views of the tasks that name them.
The daemon is replaced here by a recorder (`_docker`); tests/engines/test_harbor_engine.py runs the
real one, and bench/harbor_overhead.py compares the attempts."""

import shutil
import tomllib
from pathlib import Path

import pytest

from horizon.eval.harbor import prebuilt
from horizon.eval.harbor.prebuilt import buildable, image_tag, prebuilt_tasks, with_image
from horizon.eval.tasks.benchmark import load_benchmark
from tests.helpers import HARBOR_RUN_TASKS


class Daemon:
    """Records the docker commands; `fail` names the tasks whose build fails."""

    def __init__(self, fail=()):
        self.calls, self.fail = [], set(fail)

    def __call__(self, env, *args, timeout):
        self.calls.append(args)
        bad = args[0] == "build" and Path(args[-1]).parent.name in self.fail
        return type(
            "R", (), {"returncode": 1 if bad else 0, "stdout": "", "stderr": "no base image" if bad else ""}
        )


@pytest.fixture
def tasks(tmp_path):
    shutil.copytree(HARBOR_RUN_TASKS, tmp_path / "tasks")
    found, errors = load_benchmark(tmp_path / "tasks", "harbor")
    assert not errors and len(found) == 2
    return found


def test_a_view_names_the_jobs_image_and_the_users_task_is_untouched(tmp_path, tasks, monkeypatch):
    daemon = Daemon()
    monkeypatch.setattr(prebuilt, "_docker", daemon)
    before = {t.id: (Path(t.path) / "task.toml").read_bytes() for t in tasks}
    root = tmp_path / "job"
    with prebuilt_tasks(tasks, root, {}) as paths:
        assert sorted(paths.values()) == sorted(t.id for t in tasks)
        for path, tid in paths.items():
            view = Path(path)
            assert (
                view.parent == root / "tasks"
                and view.name == Path(next(t.path for t in tasks if t.id == tid)).name
            )
            tag = tomllib.loads((view / "task.toml").read_text())["environment"]["docker_image"]
            assert tag == image_tag(root, view)
            original = Path(next(t.path for t in tasks if t.id == tid))
            # every other file is the task's own (linked where the filesystem allows)
            assert (view / "tests/test.sh").read_bytes() == (original / "tests/test.sh").read_bytes()
            assert (
                tomllib.loads((view / "task.toml").read_text())["environment"]["cpus"] == 1
            )  # the rest kept
        assert [c[0] for c in daemon.calls] == ["build", "build"]
    assert {t.id: (Path(t.path) / "task.toml").read_bytes() for t in tasks} == before  # never written through
    assert daemon.calls[-1][0] == "rmi" and len(daemon.calls[-1]) == 3  # both images removed at the end


def test_a_task_whose_build_fails_here_goes_to_harbor_as_it_is(tmp_path, tasks, monkeypatch):
    daemon = Daemon(fail={"greet"})
    monkeypatch.setattr(prebuilt, "_docker", daemon)
    with prebuilt_tasks(tasks, tmp_path / "job", {}) as paths:
        by_id = {tid: Path(p) for p, tid in paths.items()}
    greet = next(t for t in tasks if Path(t.path).name == "greet")
    assert by_id[greet.id] == Path(greet.path).resolve()  # Harbor builds it at each trial, and says why
    assert daemon.calls[-1] == ("rmi", image_tag(tmp_path / "job", Path("count-words")))


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


def test_two_jobs_tag_their_images_apart_and_docker_accepts_the_names(tmp_path):
    a, b = (
        image_tag(tmp_path / "m1/r0/harbor", Path("Fix_Git")),
        image_tag(tmp_path / "m1/r1/harbor", Path("Fix_Git")),
    )
    assert a != b and a.startswith(f"{prebuilt.REPOSITORY}:") and a.endswith("-fix_git")
    assert image_tag(tmp_path / "j", Path(".hidden")).endswith("-hidden")
