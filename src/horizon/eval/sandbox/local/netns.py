"""Network for local sandboxes with `allow_internet`: their own network namespace behind slirp4netns.

slirp4netns (Debian's package) runs on the host in the sandbox's cgroup, under the sandbox's own
unprivileged uid where /dev/net/tun is open to it (Debian's default, 0666), else as root with its
own sandboxing (--enable-sandbox: an empty root, every capability dropped but binding low ports;
--enable-seccomp: a syscall filter) before it reads a packet. It enters the sandbox's user and network namespaces through the handles opened at start, and
gives it a tap device (10.0.2.100, gateway 10.0.2.2, DNS 10.0.2.3) whose traffic leaves through
ordinary host sockets. --disable-host-loopback: the host's 127.0.0.1 (vLLM, dockerd, anything bound
to loopback) cannot be reached. It exits when the harness closes its exit pipe or dies.
"""

from __future__ import annotations

import os
import select
import subprocess
import time

from horizon.eval.sandbox import SandboxError
from horizon.eval.sandbox.local.hostfs import HOST_ENV, as_uid, host_tool
from horizon.eval.sandbox.local.limits import join_prefix


class UserNet:
    def __init__(self, proc: subprocess.Popen, exit_w: int):
        self.proc, self.exit_w = proc, exit_w

    @classmethod
    def start(cls, sb, setpriv: str | None, timeout: float = 10.0) -> UserNet:
        tool = host_tool("slirp4netns", "slirp4netns")
        ready_r, ready_w = os.pipe()
        exit_r, exit_w = os.pipe()
        user, net = sb.ns["user"], sb.ns["net"]
        argv = [
            tool,
            "--configure",
            "--mtu=65520",
            "--disable-host-loopback",
            "--enable-sandbox",
            "--enable-seccomp",
            f"--ready-fd={ready_w}",
            f"--exit-fd={exit_r}",
            f"--userns-path=/proc/self/fd/{user}",
            "--netns-type=path",
            f"/proc/self/fd/{net}",
            "tap0",
        ]
        if setpriv is not None and os.stat("/dev/net/tun").st_mode & 0o006 == 0o006:
            argv = [*as_uid(setpriv, sb.uid), *argv]
        proc = subprocess.Popen(
            [*join_prefix(sb.cgroup), *argv],
            env=dict(HOST_ENV),
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(ready_w, exit_r, user, net),
        )
        os.close(ready_w)
        os.close(exit_r)
        got = select.select([ready_r], [], [], timeout)[0] and os.read(ready_r, 1)
        os.close(ready_r)
        made = cls(proc, exit_w)
        if got != b"1":
            made.stop(keep_stderr=True)
            err = proc.stderr.read().decode(errors="replace").strip()[-500:]
            proc.stderr.close()
            raise SandboxError(
                f"{sb.spec.name}: slirp4netns did not configure the network: {err or 'no message'}"
            )
        return made

    def stop(self, keep_stderr: bool = False) -> None:
        if self.exit_w is not None:
            os.close(self.exit_w)
            self.exit_w = None
        deadline = time.monotonic() + 2
        while self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not keep_stderr:
            self.proc.stderr.close()
