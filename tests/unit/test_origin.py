"""Jobs import the horizon the Snakefile was parsed with; a different one stops the run naming both."""

import os
import shutil

import pytest

from horizon.origin import CodeMismatch, job_pythonpath, package_dir
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
