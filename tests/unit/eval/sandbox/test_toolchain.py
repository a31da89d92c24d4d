"""The graders' toolchain shared between jobs: built once, taken whole, never another user's."""

import os
import tempfile
from pathlib import Path

import pytest

from horizon.eval.sandbox import toolchain


@pytest.fixture
def builds(monkeypatch, tmp_path):
    """toolchain.shared() under a private temporary directory, with a build that only counts itself."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    made = []

    def build(out):
        out = Path(out)
        (out / "home").mkdir(parents=True)
        (out / ".complete").write_text("ok\n")
        made.append(out)
        return out

    monkeypatch.setattr(toolchain, "build", build)
    return made


def shared_name(tmp_path):
    return tmp_path / f"horizon-toolchain-{os.geteuid()}-{toolchain._key()}"


def test_built_once_then_reused_by_later_jobs(builds, tmp_path):
    with toolchain.shared() as first:
        pass
    with toolchain.shared() as second:
        pass
    assert first == second == shared_name(tmp_path) / "toolchain"
    assert len(builds) == 1 and (first / ".complete").is_file()
    assert not list(tmp_path.glob("horizon-tools-*"))  # the job's build directory is gone


def test_a_job_that_loses_the_race_takes_the_winners(builds, tmp_path, monkeypatch):
    real = toolchain.build

    def racing(out):  # another job renames its finished toolchain into place meanwhile
        done = real(out)
        winner = tmp_path / "winner"
        real(winner / "toolchain")
        winner.chmod(0o755)
        winner.rename(shared_name(tmp_path))
        return done

    monkeypatch.setattr(toolchain, "build", racing)
    with toolchain.shared() as path:
        assert path == shared_name(tmp_path) / "toolchain" and (path / ".complete").is_file()


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another owner's directory needs root")
@pytest.mark.parametrize("planted", ["other owner", "symlink", "group writable", "unfinished"])
def test_a_planted_entry_under_the_shared_name_is_never_used(builds, tmp_path, planted):
    name = shared_name(tmp_path)
    decoy = tmp_path / "decoy"
    (decoy / "toolchain" / "home").mkdir(parents=True)
    (decoy / "toolchain" / ".complete").write_text("ok\n")
    (decoy / "toolchain" / "planted").write_text("graders would run this\n")
    if planted == "symlink":
        name.symlink_to(decoy)
    else:
        decoy.rename(name)
        if planted == "other owner":
            os.chown(name, 4242, 4242)
        elif planted == "group writable":
            name.chmod(0o775)
        else:
            (name / "toolchain" / ".complete").unlink()
    with toolchain.shared() as path:
        assert not (path / "planted").exists()
        assert (path / ".complete").is_file()
    assert not path.exists()  # the private one is removed with the job
