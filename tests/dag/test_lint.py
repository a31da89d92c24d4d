"""The workflow's own checks, as `make lint` runs them: Snakemake's linter and snakefmt."""

import pytest

from tests.helpers import BIN, REPO, snakemake


def test_snakemake_lint_is_clean():
    out = snakemake(["--lint"], cwd=REPO)
    assert "Congratulations, your workflow is in a good condition!" in out.stdout + out.stderr


def test_snakefmt_leaves_every_rule_file_unchanged():
    import subprocess

    r = subprocess.run(
        [str(BIN / "snakefmt"), "--check", "Snakefile", "workflow/rules"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["ruff-check", "ruff-format"])
def test_ruff_is_clean(args):
    import subprocess

    r = subprocess.run(
        [str(BIN / "ruff"), *args, "src", "tests", "bench", "workflow/scripts", "docs/hooks"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout[-3000:]
