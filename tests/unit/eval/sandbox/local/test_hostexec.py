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


def test_an_answer_too_late_for_its_request_is_not_taken_for_the_next_one():
    """Requests pid 1 answers itself carry an id: the late answer to one that timed out (or its late
    error) is dropped, by the next request and by a command's start alike."""
    import json
    import socket
    import time

    from horizon.eval.sandbox.local.hostexec import InitChannel

    ours, fake_init = socket.socketpair(
        socket.AF_UNIX, socket.SOCK_SEQPACKET
    )  # FAKE: a test stands for pid 1
    chan = InitChannel(ours, "t")
    with pytest.raises(SandboxError, match="did not answer in time"):
        chan.ask("foreground", "found", 0.2, pid=5)
    first = json.loads(fake_init.recv(4096))
    assert first == {"op": "foreground", "id": 1, "pid": 5}
    fake_init.send(json.dumps({"found": 1, "asleep": 1, "id": 1}).encode())  # too late for request 1
    fake_init.send(json.dumps({"error": "pid 1 could not answer foreground: ValueError", "id": 1}).encode())
    fake_init.send(json.dumps({"found": 1, "asleep": 0, "id": 2}).encode())  # request 2's own answer
    assert chan.ask("foreground", "found", 5, pid=5) == {"found": 1, "asleep": 0, "id": 2}
    assert json.loads(fake_init.recv(4096))["id"] == 2
    fake_init.send(json.dumps({"error": "pid 1 could not answer settle: OSError", "id": 2}).encode())
    fake_init.send(b'{"pid": 9}')  # a command's start is not mistaken for the late error above
    assert chan.recv("pid", time.monotonic() + 5) == {"pid": 9}
    fake_init.send(json.dumps({"error": "pid 1 could not answer settle: OSError", "id": 3}).encode())
    with pytest.raises(SandboxError, match="refused settle: pid 1 could not answer settle: OSError"):
        chan.call("settle", 5, seconds=1)
