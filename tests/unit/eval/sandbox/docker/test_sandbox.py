"""The docker sandbox without a daemon: an unreachable daemon is named."""

import pytest

from horizon.eval.sandbox import SandboxError
from tests.engine_fixtures import unavailable


def test_an_unreachable_docker_daemon_is_named(monkeypatch):
    try:
        import docker  # noqa: F401  (the SDK, of the docker extra: dev installs it)
    except ImportError:
        unavailable("the Docker SDK is not installed: pip install -e '.[docker]'")
    from horizon.eval.sandbox.docker.sandbox import client

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/horizon-docker.sock")
    with pytest.raises(
        SandboxError, match="cannot reach the Docker daemon at unix:///nonexistent/horizon-docker.sock"
    ):
        client()
