"""`horizon base-image`: the docker sandbox's base image without a registry (the build itself runs
in tests/engines, where the dockerd fixture makes it)."""

import pytest

from horizon.cli import main


def test_base_image_without_a_daemon_is_a_named_error(tmp_path, monkeypatch, capsys):
    sock = tmp_path / "no-daemon.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{sock}")
    assert main(["base-image", "--tag", "horizon-base:test"]) == 1
    err = capsys.readouterr().err
    assert (
        err.startswith("horizon base-image: cannot reach the Docker daemon at unix://") and str(sock) in err
    )
    assert "Traceback" not in err


def test_base_image_options(capsys):
    with pytest.raises(SystemExit) as e:
        main(["base-image", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert all(opt in out for opt in ("--tag", "--suite", "--mirror", "--workdir", "horizon-base:bookworm"))
