"""The local sandbox's pid 1 (runs INSIDE, stdlib only, any python3 >= 3.8; passed with `python3 -c`).

argv: the inherited socket's descriptor, then the rlimits (JSON) every command gets before it runs.

It starts the commands the host asks for and reaps every process of the sandbox. The agent cannot
reach it: the kernel drops every signal sent to a pid namespace's init from inside (no handler is
installed for SIGKILL or SIGSTOP, and the others are ignored); it makes itself non-dumpable, so no
process inside may ptrace it or read its memory or file descriptors; its only channel is a
SOCK_SEQPACKET socket inherited from the host (argv[1]), close-on-exec, not a path anywhere.

Requests (one JSON message each, from the host only):
  {"op": "exec", "argv", "env", "cwd"} + 3 file descriptors (stdin, stdout, stderr) passed along:
      a child in its own session runs argv with exactly that environment; answer {"pid", "via"}
      ("spawn" or "fork": how it started) or {"error", "errno"} when it cannot fork; later
      {"exit": pid, "status"} (negative: a signal).
  {"op": "kill", "pid"}: SIGKILL to that command's process group (a timeout).
  {"op": "settle", "seconds"}: wait until no process runs or waits on disk (two scans 20 ms apart),
      at most that long; answer {"done": true|false}.
  {"op": "killall"}: kill(-1, SIGKILL) until nothing but pid 1 is left, reaping; answer {"done": ...}.
  {"op": "foreground", "pid"}: answer {"found": 0|1, "asleep": 0|1}: whether that process exists, and
      whether every process of its terminal's foreground process group is asleep (state S; the
      terminal's look at an idle pane, without a shell started for it).
  settle, killall and foreground carry an "id" that the answer repeats; one that fails is answered
  {"error"} (pid 1 goes on).
What it sends back holds only numbers and its own error strings: nothing a command printed.

A command starts by posix_spawn (vfork and exec: about a quarter of the CPU of forking this interpreter,
which a rollout does tens of thousands of times) when the rlimits can be pid 1's own (only "core"), every
descriptor of pid 1 but the three passed along is close-on-exec, and the directory and program are found;
anything else (per-command rlimits, a missing directory or program, a failed spawn) takes the fork path,
which also words the errors. A spawning pid 1 waits until the child has run its program; a child the
agent stops before that (SIGSTOP cannot be blocked) would hold it, so the host kills such a child when
pid 1 is late to answer (hostexec.InitChannel._started).
"""

import array
import ctypes
import json
import os
import resource
import select
import signal
import socket
import sys
import time


def send(sock, obj):
    sock.send(json.dumps(obj).encode())


def recv(sock):
    fds = array.array("i")  # close-on-exec: no command inherits another's descriptors
    msg, anc, _flags, _addr = sock.recvmsg(
        1 << 20, socket.CMSG_LEN(3 * fds.itemsize), socket.MSG_CMSG_CLOEXEC
    )
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return msg, list(fds)


def exit_code(status):
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


SPAWNABLE = {"core"}  # rlimits pid 1 can hold itself (its children inherit them)


def program(argv0, env):
    """The file execvpe would run for argv0 with env's PATH, from the current directory (None: not
    found, the fork path says why)."""
    if "/" in argv0:
        return argv0
    for d in os.get_exec_path(env):
        path = os.path.join(d, argv0)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def spawn(req, fds):
    """The command started by posix_spawn in its own session, or None (then the fork path runs and words
    any error). posix_spawn returns once the child has run its program (vfork): a child the agent stops
    before that holds pid 1 until the host kills it (LocalSandbox._release_spawn)."""
    if len(fds) != 3:
        return None
    try:
        os.chdir(req["cwd"])  # inherited by the child (pid 1 is single-threaded)
        path = program(req["argv"][0], req["env"])  # a relative PATH entry: from the command's directory
        if path is None:
            return None
        actions = [(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(fds)]
        pid = os.posix_spawn(path, req["argv"], req["env"], file_actions=actions, setsid=True)
        return {"pid": pid, "via": "spawn"}
    except Exception:  # noqa: BLE001 - OSError, a NUL in an argument (ValueError), no setsid support, ...
        return None
    finally:
        os.chdir("/")  # where pid 1 stays (a directory the agent cannot remove)


def start(req, fds, limits):
    if set(limits) <= SPAWNABLE:
        started = spawn(req, fds)
        if started is not None:
            return started
    try:
        pid = os.fork()
    except OSError as e:  # the sandbox is out of processes or memory
        return {"error": "fork failed: " + (e.strerror or str(e)), "errno": e.errno}
    if pid == 0:
        try:
            os.setsid()
            for name, value in limits.items():
                resource.setrlimit(getattr(resource, "RLIMIT_" + name.upper()), (value, value))
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
            os.closerange(3, 65536)
            os.chdir(req["cwd"])
            os.execvpe(req["argv"][0], req["argv"], req["env"])
        except BaseException as e:  # noqa: BLE001 - report like a shell, never return into the loop
            os.write(2, f"{(req['argv'] or ['?'])[0]}: {e}\n".encode(errors="replace"))
        finally:
            os._exit(127)
    return {"pid": pid, "via": "fork"}


def reap(sock, pending):
    """Reap everything: the commands' exits are reported, the orphans' are not."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in pending:
            pending.discard(pid)
            send(sock, {"exit": pid, "status": exit_code(status)})


def stats():
    """(pid, the fields after the program's name) of every process: read as bytes and split at the last
    ")", so a name the agent chose (any bytes, ")", spaces, newlines) is neither decoded nor a field."""
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat", "rb") as f:
                    yield int(p), f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue  # gone since the listing


def settle(seconds):
    end, quiet = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        busy = any(pid != 1 and fields[:1] in ([b"R"], [b"D"]) for pid, fields in stats())
        quiet = 0 if busy else quiet + 1
        if quiet >= 2:
            return True
        time.sleep(0.02)
    return False


def foreground(pid):
    """Whether `pid` exists, and whether the foreground process group of its terminal is all asleep."""
    procs = {p: (f[0], f[2], f[5]) for p, f in stats() if len(f) > 5}  # state, group, terminal's group
    if pid not in procs:
        return {"found": 0, "asleep": 0}
    group = [state for state, pgrp, _ in procs.values() if pgrp == procs[pid][2]]
    return {"found": 1, "asleep": int(bool(group) and all(state == b"S" for state in group))}


def killall(sock, pending, seconds=10):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            os.kill(-1, signal.SIGKILL)  # every process but this one (zombies until reaped)
        except ProcessLookupError:
            return True
        reap(sock, pending)
        time.sleep(0.002)
    return False


ANSWERED = {  # the requests pid 1 answers itself: (request, socket, pending commands) -> answer
    "settle": lambda req, sock, pending: {"done": settle(req["seconds"])},
    "killall": lambda req, sock, pending: {"done": killall(sock, pending)},
    "foreground": lambda req, sock, pending: foreground(int(req["pid"])),
}


def main():
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
    sock = socket.socket(fileno=int(sys.argv[1]))
    limits = json.loads(sys.argv[2])
    sock.set_inheritable(False)
    for fd in os.listdir("/proc/self/fd"):  # whatever else it was started with: never a command's
        if int(fd) > 2:
            try:
                os.set_inheritable(int(fd), False)
            except OSError:
                pass  # the directory's own descriptor, closed by now
    os.chdir("/")
    for name in set(limits) & SPAWNABLE:  # held by pid 1 itself, so spawned commands inherit them
        resource.setrlimit(getattr(resource, "RLIMIT_" + name.upper()), (limits[name], limits[name]))
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    pending = set()
    send(sock, {"ready": os.getpid()})
    while True:
        ready = select.select([sock, wake_r], [], [], 60)[0]
        if wake_r in ready:
            while True:
                try:
                    if not os.read(wake_r, 4096):
                        break
                except BlockingIOError:
                    break
        reap(sock, pending)
        if sock in ready:
            msg, fds = recv(sock)
            if not msg:
                os._exit(0)  # the host is gone (it takes the sandbox with it anyway)
            req = json.loads(msg)
            if req["op"] == "exec":
                reply = start(req, fds, limits)
                if "pid" in reply:
                    pending.add(reply["pid"])
                send(sock, reply)
            elif req["op"] == "kill":
                try:
                    os.killpg(req["pid"], signal.SIGKILL)
                except OSError:
                    pass
            elif req["op"] in ANSWERED:
                try:  # pid 1 answers, whatever it met; the id ties the answer to its request
                    reply = ANSWERED[req["op"]](req, sock, pending)
                except Exception as e:  # noqa: BLE001 - its own words only: the type, no agent's bytes
                    reply = {"error": f"pid 1 could not answer {req['op']}: {type(e).__name__}"}
                send(sock, {**reply, "id": req.get("id")})
            for fd in fds:
                os.close(fd)


main()
