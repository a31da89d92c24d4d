"""The workflow as a module fetched from a remote source (a URL, `github(...)`): Snakemake fetches its
Snakefile, rule files and scripts from there, while the horizon package installed in the environment
runs it; its version must be the fetched workflow's.

Offline: the repository's published files are served by `python -m http.server` (a URL), or cloned
from a local bare repository that git is told stands for https://github.com/ (`github(...)`). A copy
of src/horizon on PYTHONPATH stands in for the installed wheel; it records every process that imports
it, so a test can see that the parse and the jobs ran that one package.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.dag import test_module_use as local_module
from tests.helpers import BIN, REPO, job_counts, write_config

RELIABILITY = local_module.RELIABILITY
plain_counts = local_module.plain_counts  # the fixture: the paper grid's jobs, from the repository root
# What a remote source serves: no src/, so workflow/'s links into src/horizon/assets dangle (raw files
# of GitHub give a link's target as text): the packaged files must come from the installed package.
PUBLISHED = ["Snakefile", "pyproject.toml", "workflow"]
GITHUB = "owner/horizon"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def publish(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in PUBLISHED:
        if (REPO / name).is_dir():
            shutil.copytree(
                REPO / name, dest / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(REPO / name, dest / name)
    return dest


def install_copy(dest: Path, version: str | None = None) -> Path:
    """src/horizon copied to dest/horizon (a PYTHONPATH folder), recording each importing process's
    package folder in dest/imports.log; `version` replaces its __version__."""
    pkg = dest / "horizon"
    shutil.copytree(REPO / "src/horizon", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    init = pkg / "__init__.py"
    text = init.read_text()
    if version:
        text = text.replace('__version__ = "', f'__version__ = "{version}"  # was "', 1)
    log = dest / "imports.log"
    init.write_text(f"{text}\nwith open({str(log)!r}, 'a') as _log:\n    _log.write(__path__[0] + '\\n')\n")
    return dest


def imports(site: Path) -> list[str]:
    log = site / "imports.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The published files at http://127.0.0.1:<free port>, for the module's tests; stopped by pid."""
    root = publish(tmp_path_factory.mktemp("served") / "files")
    cmd = [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", str(root)]
    with open(root.parent / "requests.log", "w") as requests:  # the server logs each request on stderr
        server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=requests, text=True)
    try:
        line = server.stdout.readline()  # "Serving HTTP on 127.0.0.1 port 41234 (http://...) ..."
        assert " port " in line, f"http.server did not start: {line!r}"
        yield f"http://127.0.0.1:{line.split(' port ')[1].split()[0]}"
    finally:
        os.kill(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def github_repos(tmp_path_factory) -> Path:
    """A folder of bare repositories; git maps https://github.com/<owner>/<name> to <folder>/<owner>/<name>.
    owner/horizon holds the published files, tagged v<version> as a release would be."""
    work = publish(tmp_path_factory.mktemp("release"))
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.org", "-C", str(work)]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "release"], ["tag", f"v{VERSION}"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    repos = tmp_path_factory.mktemp("repos")
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(repos / GITHUB)], check=True)
    return repos


def user_study(workdir: Path, snakefile: str, configfile: Path | str) -> Path:
    """A user's directory whose Snakefile uses horizon as a module from `snakefile` (Snakefile syntax)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "Snakefile").write_text(
        f'configfile: "{configfile}"\n'
        f"module horizon:\n    snakefile: {snakefile}\n    config: config\n"
        "use rule * from horizon as horizon_*\n"
    )
    return workdir


def run_user(workdir: Path, args: list[str], site: Path, repos: Path | None = None, check: bool = True,
             timeout: int = 600) -> subprocess.CompletedProcess:  # fmt: skip
    """snakemake in the user's directory, with `site` as the only PYTHONPATH (the installed horizon) and
    Snakemake's caches in the test's folder; with `repos`, github.com is that folder of bare repositories."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GITHUB_TOKEN")}
    env |= {"PYTHONPATH": str(site), "XDG_CACHE_HOME": str(workdir.parent / "cache")}
    if repos:
        env |= {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"url.file://{repos}/.insteadOf",
                "GIT_CONFIG_VALUE_0": "https://github.com/"}  # fmt: skip
    proc = subprocess.run([str(BIN / "snakemake"), *args], cwd=workdir, capture_output=True, text=True,
                          timeout=timeout, env=env)  # fmt: skip
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                             f"{proc.stderr[-5000:]}")  # fmt: skip
    return proc


def url_source(served: str) -> str:
    return f'"{served}/Snakefile"'


def github_source() -> str:
    return f'github("{GITHUB}", path="Snakefile", tag="v{VERSION}")'


@pytest.mark.parametrize("kind", ["url", "github"])
def test_paper_grid_from_a_remote_source_lists_the_jobs_of_the_plain_run(
    tmp_path, kind, served, github_repos, plain_counts
):
    site = install_copy(tmp_path / "site")
    source = url_source(served) if kind == "url" else github_source()
    user = user_study(tmp_path / "my-study", source, REPO / "config.yaml")
    out = run_user(user, [RELIABILITY, "-n", "-q", "rules"], site, github_repos if kind == "github" else None)
    counts = job_counts(out.stdout)
    assert {name.removeprefix("horizon_"): n for name, n in counts.items()} == plain_counts
    assert set(imports(site)) == {str(site / "horizon")}  # the installed package, not the checkout's
    assert not (user / "results").exists()


def test_the_rubric_and_the_prompts_of_a_fetched_workflow_are_the_installed_packages(tmp_path, served):
    """workflow/judge/rubric.yaml and workflow/synth/prompts link into src/: the installed copies are read."""
    raw = yaml.safe_load((REPO / "synth" / "config.yaml").read_text())
    raw["synth"]["seeds"] = str(REPO / raw["synth"]["seeds"])
    raw["eval"]["benchmarks"]["demo"]["path"] = str(REPO / "demo" / "tasks")
    raw["eval"]["prompt_template"] = str(REPO / "demo" / "prompt.yaml")
    raw["judge"] = {"enabled": True, "endpoint": "http://judge:8000/v1", "model": "m"}
    site = install_copy(tmp_path / "site")
    user = user_study(tmp_path / "my-study", url_source(served), write_config(tmp_path / "synth.yaml", raw))
    out = run_user(user, ["results/synth/tasks.json", "results/corpus/judge.parquet", "-n"], site).stdout
    assets = site / "horizon" / "assets"
    assert f"{assets}/judge/rubric.yaml" in out
    assert all(
        f"{assets}/synth/prompts/{p.name}" in out for p in (REPO / "workflow/synth/prompts").glob("*.j2")
    )


def test_a_missing_package_names_the_command_that_installs_the_workflows_version(tmp_path, github_repos):
    """No horizon in the environment (a package that is not there, as Python reports it)."""
    site = tmp_path / "site"
    (site / "horizon").mkdir(parents=True)
    (site / "horizon/__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'horizon'\", name='horizon')\n"
    )
    user = user_study(tmp_path / "my-study", github_source(), REPO / "config.yaml")
    proc = run_user(user, [RELIABILITY, "-n"], site, github_repos, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"fetched from github.com/{GITHUB}/Snakefile@v{VERSION}" in out
    assert f'install it: pip install "git+https://github.com/{GITHUB}@v{VERSION}"' in out


def test_another_installed_version_stops_the_parse_naming_both(tmp_path, served):
    site = install_copy(tmp_path / "site", version="0.0.1.dev9")
    user = user_study(tmp_path / "my-study", url_source(served), REPO / "config.yaml")
    proc = run_user(user, [RELIABILITY, "-n"], site, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"fetched from {served}/Snakefile is horizon {VERSION}" in out
    assert f"({site / 'horizon'}) is 0.0.1.dev9" in out


@pytest.mark.slow
def test_demo_student_built_through_a_url_module(tmp_path, served, local_engine):
    """The scripted teacher's corpus, normalize and the tiny student run with their scripts fetched over
    HTTP; parse and jobs import the installed package."""
    site = install_copy(tmp_path / "site")
    user = tmp_path / "my-study"
    local_module.demo_study(user)
    user_study(user, url_source(served), "config.yaml")
    run_user(user, ["results/student/student.json", "--cores", "2"], site, timeout=900)
    res = user / "results"
    student = json.loads((res / "student" / "student.json").read_text())
    assert (user / student["model"]).resolve() == (res / "student" / "tiny").resolve()
    assert (res / "student" / "tiny" / "config.json").exists()
    assert json.loads((res / "corpus" / "stats.json").read_text())["completed"] == 12 * local_module.VARIANTS
    loaded = imports(site)
    assert len(loaded) > 3 and set(loaded) == {str(site / "horizon")}  # the parse and each job's script
