"""The docker sandbox without a daemon: an unreachable daemon is named."""

import pytest

from horizon.eval.sandbox import SandboxError


def test_an_unreachable_docker_daemon_is_named(monkeypatch):
    pytest.importorskip("docker")
    from horizon.eval.sandbox.docker.sandbox import client

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/horizon-docker.sock")
    with pytest.raises(
        SandboxError, match="cannot reach the Docker daemon at unix:///nonexistent/horizon-docker.sock"
    ):
        client()
