"""The host's end of the local sandbox's init channel, against a FAKE init (a socket pair)."""

import pytest

from horizon.eval.sandbox import SandboxError


def test_a_garbled_silent_or_closed_init_channel_is_a_sandbox_error():
    import socket
    import time

    from horizon.eval.sandbox.local.hostexec import InitChannel

    ours, fake_init = socket.socketpair(
        socket.AF_UNIX, socket.SOCK_SEQPACKET
    )  # FAKE: a test stands for pid 1
    chan = InitChannel(ours, "t")
    fake_init.send(b"x" * 100_000)  # too large and not JSON: cut at 4 KiB, refused
    with pytest.raises(SandboxError, match="t: a malformed message from the sandbox's init"):
        chan.recv("pid", time.monotonic() + 5)
    fake_init.send(b'{"exit": 7, "status": 0}')  # a late exit of another command is skipped, not taken
    fake_init.send(b'{"pid": 9}')
    assert chan.recv("pid", time.monotonic() + 5) == {"pid": 9}
    with pytest.raises(SandboxError, match="did not answer in time"):
        chan.recv("exit", time.monotonic() + 0.2, 9)
    fake_init.close()
    with pytest.raises(SandboxError, match="t: the sandbox's init is gone"):
        chan.recv("exit", time.monotonic() + 5, 9)
