"""The grader's pytest plugin guard (programs/pytest_guard.py) with this environment's pytest: a plugin
the agent registered by entry point (pytest11) is left out when its files are listed as changed, the
others load as pytest's autoload would load them (pytest-json-ctrf's --ctrf works)."""

import os
import subprocess
import sys

import pytest

from horizon.eval.sandbox import programs

PLUGIN = (
    "import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    out = yield\n    out.get_result().outcome = 'passed'\n"
)


@pytest.fixture
def setup(tmp_path):
    site, lib, tests = tmp_path / "site", tmp_path / "lib", tmp_path / "tests"
    info = site / "evil-1.0.dist-info"
    info.mkdir(parents=True)
    lib.mkdir()
    tests.mkdir()
    (site / "evilplug.py").write_text(PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nevil = evilplug\n")
    (info / "RECORD").write_text("evilplug.py,,\n")
    (lib / "horizon_pytest_guard.py").write_text(programs.source("pytest_guard.py"))
    (tests / "test_x.py").write_text("def test_x():\n    assert False\n")
    return tmp_path


def run(root, guard: bool, *args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = f"{root / 'lib'}:{root / 'site'}"
    if guard:
        env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTEST_PLUGINS="horizon_pytest_guard")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(root / "tests"), *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, cwd=root)


def test_the_agents_plugin_is_left_out_and_the_others_load(setup):
    assert run(setup, False).returncode == 0  # the control: autoloaded, the plugin forges a pass
    assert run(setup, True).returncode == 0  # nothing listed: the guard loads it as autoload would
    (setup / "lib" / "horizon_pytest_guard.changed").write_text(f"{setup}/site/evilplug.py\n")
    r = run(setup, True, "--ctrf", str(setup / "ctrf.json"))
    assert r.returncode == 1 and "1 failed" in r.stdout, r.stdout + r.stderr
    assert "pytest plugin evil not loaded (the agent changed its files)" in r.stderr
    assert (setup / "ctrf.json").exists()  # pytest-json-ctrf, an entry point of this environment, loaded


def test_a_blocked_name_stays_blocked(setup):
    assert run(setup, True, "-p", "no:evil").returncode == 1
