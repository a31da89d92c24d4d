"""Jobs import the horizon the Snakefile was parsed with; a different one stops the run naming both."""

import os
import shutil
import tomllib
from pathlib import Path

import pytest

from horizon import origin
from horizon.origin import CodeMismatch, check_release, job_pythonpath, package_dir, site_packages
from tests.helpers import REPO


def copy_package(dest):
    shutil.copytree(REPO / "src/horizon", dest / "horizon", ignore=shutil.ignore_patterns("__pycache__"))
    return dest / "horizon"


def test_the_workflows_own_source_goes_first(tmp_path):
    path = job_pythonpath(REPO, f"/elsewhere{os.pathsep}{REPO}/src", imported=REPO / "src/horizon")
    assert path.split(os.pathsep) == [str(REPO / "src"), "/elsewhere"]


def test_an_identical_copy_runs_the_workflows_source(tmp_path):
    copy = copy_package(tmp_path)  # a wheel built from this checkout
    assert job_pythonpath(REPO, None, imported=copy) == str(REPO / "src")


def test_a_different_horizon_is_an_error_naming_both(tmp_path):
    copy = copy_package(tmp_path)
    (copy / "grid.py").write_text((copy / "grid.py").read_text() + "\n# changed\n")
    with pytest.raises(CodeMismatch) as e:
        job_pythonpath(REPO, None, imported=copy)
    msg = str(e.value)
    assert str(copy) in msg and str(REPO / "src/horizon") in msg and "grid.py" in msg


def test_without_a_bundled_source_jobs_get_the_imported_package(tmp_path):
    assert job_pythonpath(tmp_path, None) == str(package_dir().parent)


def test_a_workflow_without_source_of_its_own_runs_the_imported_copy_first(tmp_path):
    copy = copy_package(tmp_path)  # on PYTHONPATH, or put on sys.path by the user's Snakefile
    path = job_pythonpath(None, f"/elsewhere{os.pathsep}{tmp_path}", imported=copy)
    assert path.split(os.pathsep) == [str(tmp_path), "/elsewhere"]


def test_an_installed_package_leaves_pythonpath_as_it_is(monkeypatch, tmp_path):
    """Jobs of this environment find site-packages anyway; put on PYTHONPATH, it would come before the
    standard library."""
    site_dir = tmp_path / "site-packages"
    copy = copy_package(site_dir)
    monkeypatch.setattr(origin, "site_packages", lambda: {site_dir.resolve()})
    assert job_pythonpath(None, "/elsewhere", imported=copy) == "/elsewhere"
    assert job_pythonpath(None, None, imported=copy) == ""
    assert job_pythonpath(tmp_path, None, imported=copy) == ""  # a local workflow folder without src/


def test_the_site_packages_are_this_environments():
    import yaml  # a dependency, installed in this environment's site-packages

    assert Path(yaml.__file__).resolve().parents[1] in site_packages()


def test_the_installed_version_must_be_the_fetched_workflows(monkeypatch):
    import horizon

    check_release(horizon.__version__, "http://host/Snakefile", "pip install x")  # the same: no error
    monkeypatch.setattr(horizon, "__version__", "0.0.1.dev9")
    with pytest.raises(CodeMismatch) as e:
        check_release(
            "0.1.0", "http://host/Snakefile", 'pip install "git+https://github.com/o/horizon@v0.1.0"'
        )
    msg = str(e.value)
    assert "http://host/Snakefile is horizon 0.1.0" in msg and f"({package_dir()}) is 0.0.1.dev9" in msg
    assert 'pip install "git+https://github.com/o/horizon@v0.1.0"' in msg


def test_the_package_version_is_the_projects():
    """What a fetched workflow's pyproject.toml says is what its package reports (check_release)."""
    import horizon

    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"] == horizon.__version__
