"""The `local` sandbox: bubblewrap, no daemon, no image. The agent in it is hostile by assumption.

Files: the host's system directories read-only (/usr, /etc, /bin, /lib...; with what the Dockerfile's
RUN steps wrote there in a layer of their own, syslayer.py), / itself read-only;
/app (and every top-level directory the task's Dockerfile puts files in: imagebuild.py, which also
replays its RUN steps before the agent starts) an overlay of the task's files (a host copy with fixed
timestamps, read-only underneath) and a tmpfs of `storage_mb` for what the agent writes; /tmp, /var/tmp, /root and /run tmpfs; the
graders' toolchain read-only at /opt/horizon; /tests and /logs empty and read-only until grading.
Nothing else of the host is visible (not the repository, the tasks' tests and solutions, the
results). Namespaces: its own user (root inside, an unprivileged uid outside: 200000 + n per
sandbox when the harness is root), mount, pid, ipc, uts and network; no capabilities.

Processes: pid 1 is a small init (programs/init.py, stdlib python) started with --as-pid-1. The kernel never
delivers a signal sent from inside a pid namespace to its pid 1 (it installs no handler), so
`kill -9 -1` inside ends every process but the sandbox; it makes itself non-dumpable (no ptrace,
no /proc/1/mem or /proc/1/fd from inside), and the host sets its oom_score_adj to -1000. It starts
each `exec`, reaps orphans, and before grading waits for quiet and kills every other process itself
(no process to start: a fork bomb cannot keep it from that). Its only channel is a socket inherited
from the host at start (not a path in the sandbox); each command's stdin, stdout and stderr are
pipes the host made and passed along, read here with a cap (hostexec); the channel carries only the
init's pids and exit codes. Commands get exactly the environment they are given, no capabilities,
the sandbox's cgroup. (Starting each command by nsenter from the host instead cost 3x per command
on a loaded machine: four programs per command.)

Set-up steps that need root inside the sandbox (mounting /app's overlay; fresh /tests, /logs and
HOME for the grader) run from the host by entering the sandbox's namespaces (nsenter, as `docker
exec` does) through handles opened at start, outside the sandbox's cgroup; so does killing the
agent's processes when pid 1 cannot say it did. bubblewrap starts with an empty environment.

Limits: a cgroup per sandbox (limits.py: memory incl. its tmpfs, processes, CPU quota), size-limited
tmpfs; where cgroups cannot be created, `limits="auto"` falls back to per-process rlimits (as an
unprivileged user) and `limits="cgroup"` stops with the reason. Network: none, or with
`allow_internet` a network namespace of its own behind slirp4netns (user-mode, host loopback not
reachable). Grading (eval/grading/grader.py) mounts fresh /tests, /logs and HOME from inside once every agent
process is dead, so the host never writes a path the agent could have linked.
"""

from __future__ import annotations

import json
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from horizon.eval.sandbox import (
    Diagnosis,
    ExecResult,
    Finding,
    Sandbox,
    SandboxError,
    SandboxSpec,
    programs,
)
from horizon.eval.sandbox.local import audit, hostexec, imagebuild, netns, syslayer
from horizon.eval.sandbox.local import limits as cgroups
from horizon.eval.sandbox.local.hostfs import (
    HOST_ENV,
    UidLease,
    as_uid,
    host_tool,
    prepare_root,
    sweep_dirs,
    user_processes,
    warn_not_root,
)
from horizon.eval.sandbox.toolchain import GUARD_ENV, GUARD_FILE

log = logging.getLogger("horizon.eval.sandbox")

SYSTEM_DIRS = ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MARKER = "horizon-sandbox-init"
NAMESPACES = {
    "user": "--user",
    "mnt": "--mount",
    "pid": "--pid",
    "net": "--net",
    "ipc": "--ipc",
    "uts": "--uts",
}
INIT = programs.source("init.py")
KILL_ALL = """i=0
while [ $i -lt 500 ]; do kill -9 -1 2>/dev/null || exit 0; i=$((i+1)); sleep 0.01; done
echo "processes of the sandbox survive kill -9 -1" >&2; exit 1"""


def bwrap_path() -> str:
    return host_tool("bwrap", "bubblewrap")


def _init_python() -> tuple[str, list[str]]:
    """(interpreter, extra read-only binds) for the init inside the sandbox."""
    for p in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(p):
            return p, []
    import sys

    return os.path.realpath(sys.executable), [os.path.realpath(sys.base_prefix)]


def kill_uid(uid: int, setpriv: str) -> None:
    """SIGKILL to every process whose real or saved uid is `uid`, anywhere on the host: `kill -1` run as
    that uid (setpriv, so the harness's process is not forked), one system call over the kernel's process
    list where pkill reads /proc/PID/status of every process on the machine: 2.6 CPU-ms against 35 beside
    588 processes, 2.3 against 7.0 beside 112 (bench/sandbox_stop.py). A uid at its process limit cannot
    start `kill` (execve fails with EAGAIN): then root's pkill, which no limit stops."""
    try:
        r = subprocess.run(
            [*as_uid(setpriv, uid), "kill", "-KILL", "--", "-1"], env=HOST_ENV, capture_output=True
        )
        if r.returncode == 0:
            return
        why = (r.stderr or b"").decode(errors="replace").strip()[-200:] or f"exit {r.returncode}"
    except OSError as e:
        why = str(e)
    log.warning("uid %d: kill -1 as the uid failed (%s): pkill instead", uid, why)
    subprocess.run(["pkill", "-KILL", "-u", str(uid)], capture_output=True)


class LocalSandbox(Sandbox):
    grader_home = "/opt/horizon/home"

    def __init__(
        self,
        spec: SandboxSpec,
        toolchain: str | Path | None = None,
        hostname: str = "box",
        limits: str = "auto",
        image_map: dict | None = None,
        base_image: str | None = None,
    ):
        # image_map, base_image: docker's options; here the host's userland stands in for every FROM image
        if limits not in ("auto", "cgroup", "rlimit"):
            raise ValueError(f"sandbox_options.limits: {limits!r} (allowed: auto, cgroup, rlimit)")
        self.spec, self.hostname, self.limits = spec, hostname, limits
        self.toolchain = Path(toolchain) if toolchain else None
        self.proc: subprocess.Popen | None = None
        self.root: Path | None = None
        self.lease: UidLease | None = None
        self.cgroup: cgroups.Cgroup | None = None
        self.ns: dict[str, int] = {}
        self.net: netns.UserNet | None = None
        self.init_pid = 0
        self.image: imagebuild.LocalImage | None = None
        self.chan: hostexec.InitChannel | None = None
        self.tools = {t: host_tool(t, "util-linux") for t in ("nsenter", "setpriv")}

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        bwrap = bwrap_path()
        as_root = os.geteuid() == 0
        self.lease = UidLease() if as_root else None
        self.uid = self.lease.uid if as_root else os.getuid()
        if not as_root:
            warn_not_root(self.uid)
        try:
            self.root, tools, self.image = prepare_root(
                self.spec, self.toolchain, self.uid if as_root else None
            )
            self.cgroup = self._make_cgroup()
            self._launch(bwrap, tools, as_root)
            if self.image.layer:
                syslayer.attach(self, self.image.layer)
            script = imagebuild.mount_script(self.image, "opt" in self.image.writable and tools is not None)
            r = self.run_from_host(["sh", "-c", script], privileged=True, timeout=30)
            if r.rc != 0:
                raise SandboxError(
                    f"{self.spec.name}: mounting /app failed: {r.stderr.decode(errors='replace')[-500:]}"
                )
            setpriv = self.tools["setpriv"] if as_root else None
            if self.image.inside:
                self._build(setpriv)
            self._snapshot()
            if self.spec.allow_internet and self.net is None:
                self.net = netns.UserNet.start(self, setpriv)
        except BaseException:
            self.stop()
            raise

    def _build(self, setpriv: str | None) -> None:
        """The Dockerfile's RUN steps, with the network where the machine gives one (as `docker build`
        gives it whatever the task's runtime network); the runtime keeps the task's own."""
        self.net = netns.build_network(self, setpriv)
        # slirp4netns's DNS at /etc/resolv.conf while the steps run, unless the runtime's is there already
        # (the build's own /etc hides it)
        own = self.spec.allow_internet and not self.image.layer
        imagebuild.run_inside(self, self.image, resolver=self.net is not None and not own)
        if self.net is not None and not self.spec.allow_internet:
            self.net.stop()  # its tap device goes with it: the namespace has only loopback again
            self.net = None

    def _snapshot(self) -> None:
        """The writable directories that decide a grade, as the image left them (local/audit.py)."""
        request = audit.watched(self.image_env().get("PATH") or "", SYSTEM_DIRS)
        self._before, sites = audit.scan(self, request)
        self._watch = {**request, "deep": sites}

    def audit(self) -> Finding | None:
        """The PATH directories and Python site directories the agent can write, before and after; the
        system directories (the host's and the build's layer, read-only) as the sandbox holds them."""
        from horizon.eval.sandbox import integrity

        watch = getattr(self, "_watch", None)
        if not watch or not (watch["flat"] or watch["deep"]):
            return None
        after, _ = audit.scan(self, watch)
        view = audit.View(self.init_pid)
        layer = integrity.SnapshotLayer(
            self._before,
            after,
            watch["flat"],
            watch["deep"],
            lambda p: audit.system_entry(view, p, SYSTEM_DIRS),
        )
        env = self.image_env()
        found = integrity.audit(layer, env.get("PATH") or "", env.get("LD_LIBRARY_PATH") or "")
        self._guard_list = found.site_changes
        return Finding("tampered", found.evidence) if found.tampered else None

    @property
    def workdir(self) -> str:
        """The task's, else the image's: "/" when its Dockerfile sets no WORKDIR (as Docker), else /app."""
        return self.spec.workdir or (self.image.default_workdir if self.image is not None else "/app")

    def image_env(self) -> dict[str, str]:
        env = dict(self.image.env) if self.image is not None else dict(self.spec.env)
        if getattr(self, "_guard_list", None):
            env[GUARD_ENV] = f"/logs/{GUARD_FILE}"
        return env

    def _make_cgroup(self) -> cgroups.Cgroup | None:
        if self.limits == "rlimit":
            return None
        try:
            return cgroups.Cgroup.create(
                self.spec.name, self.spec.memory_mb, self.spec.max_processes, self.spec.cpus
            )
        except cgroups.CgroupsUnavailable as e:
            if self.limits == "cgroup":
                raise SandboxError(f"{self.spec.name}: sandbox_options.limits is cgroup, but {e}") from None
            log.warning(
                "%s: no cgroup (%s): falling back to per-process rlimits (docs/evaluation/security.md)",
                self.spec.name,
                e,
            )
            return None

    def _bwrap_argv(self, bwrap: str, tools: Path | None, info_fd: int, chan_fd: int) -> list[str]:
        py, extra = _init_python()
        argv = [
            bwrap,
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--as-pid-1",
        ]
        for name in SYSTEM_DIRS:
            p = Path("/") / name
            if p.is_symlink():
                argv += ["--symlink", os.readlink(p), str(p)]
            elif p.is_dir():
                argv += ["--ro-bind", str(p), str(p)]
        for path in extra:
            argv += ["--ro-bind", path, path]
        if self.spec.allow_internet:
            argv += ["--ro-bind", str(self.root / "resolv.conf"), "/etc/resolv.conf"]
        # each scratch tmpfs may take half the memory (a full one fails with ENOSPC, not the OOM killer);
        # together they are bounded by the cgroup, which their pages are charged to
        mem, app = str(self.spec.memory_mb << 19), str(self.spec.storage_mb << 20)
        argv += [
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--size",
            mem,
            "--tmpfs",
            "/tmp",
            "--size",
            mem,
            "--tmpfs",
            "/var/tmp",
            "--size",
            mem,
            "--tmpfs",
            "/root",
            "--size",
            str(64 << 20),
            "--tmpfs",
            "/run",
            "--ro-bind",
            str(self.root / "image"),
            "/run/horizon/lower",
            "--size",
            app,
            "--tmpfs",
            "/run/horizon/upper",
            "--dir",
            "/tests",
            "--dir",
            "/logs",
        ]
        for top in self.image.writable:
            if top not in ("tmp", "root"):
                argv += ["--dir", f"/{top}"]
        if self.image.inside:
            argv += ["--ro-bind", str(self.root / "build"), "/run/horizon/build"]
        else:  # files the Dockerfile copied into / itself (a build copies them: imagebuild.mount_script)
            argv += [
                a for f in self.image.root_files for a in ("--ro-bind", str(self.root / "image" / f), f"/{f}")
            ]
        if self.image.layer:  # the build's layer over the system directories (syslayer.py)
            argv += ["--bind", str(self.root / "layer"), syslayer.LAYER]
            argv += ["--ro-bind", str(self.root / "mask"), syslayer.MASK]
            argv += [a for t in self.image.layer for a in ("--dir", f"{syslayer.SYS}/{t}")]
        argv += (
            ["--ro-bind", str(tools), "/opt/horizon"] if tools is not None else ["--dir", self.grader_home]
        )
        if tools is not None and "opt" in self.image.writable:
            argv += ["--ro-bind", str(tools), "/run/horizon/tools"]
        sealed = [] if self.image.inside else ["--remount-ro", "/"]  # a build seals / itself once it is done
        return [
            *argv,
            *sealed,
            "--uid",
            "0",
            "--gid",
            "0",
            "--hostname",
            self.hostname,
            "--chdir",
            "/",
            "--clearenv",
            "--setenv",
            "PATH",
            PATH,
            "--setenv",
            "HOME",
            "/root",
            "--setenv",
            "LANG",
            "C.UTF-8",
            "--info-fd",
            str(info_fd),
            "--",
            py,
            "-I",
            "-S",
            "-c",
            INIT,
            str(chan_fd),
            json.dumps(self._rlimits()),
            MARKER,
        ]

    def _rlimits(self) -> dict:
        """What every command gets: no core dumps; without a cgroup, the per-process limits too."""
        if self.cgroup is not None:
            return {"core": 0}
        s = self.spec
        nproc = s.max_processes if self.lease else user_processes(self.uid) + s.max_processes
        return {
            "nproc": nproc,
            "as": s.memory_mb << 20,
            "cpu": s.cpu_seconds,
            "fsize": s.max_file_mb << 20,
            "core": 0,
        }

    def _launch(self, bwrap: str, tools: Path | None, as_root: bool) -> None:
        """Start bubblewrap (in the cgroup, with an empty environment); open the namespaces; wait for init."""
        info_r, info_w = os.pipe()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = self._bwrap_argv(bwrap, tools, info_w, theirs.fileno())
        if as_root:
            argv = [*as_uid(self.tools["setpriv"], self.uid), *argv]
        try:
            self.proc = subprocess.Popen(
                [*cgroups.join_prefix(self.cgroup), *argv],
                env=dict(HOST_ENV),
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(info_w, theirs.fileno()),
            )
        finally:
            os.close(info_w)
            theirs.close()
        self.chan = hostexec.InitChannel(ours, self.spec.name, unstick=self._release_spawn)
        deadline = time.monotonic() + 20
        info = _read_all(info_r, deadline)
        os.close(info_r)
        try:
            if not info:
                raise SandboxError("no information from bubblewrap")
            self.chan.recv("ready", deadline)
        except SandboxError:
            self._fail_start()
        self.init_pid = json.loads(info)["child-pid"]
        for ns in NAMESPACES:
            self.ns[ns] = os.open(f"/proc/{self.init_pid}/ns/{ns}", os.O_RDONLY | os.O_CLOEXEC)
        try:
            Path(f"/proc/{self.init_pid}/oom_score_adj").write_text("-1000")
        except OSError:  # not root: the kernel only lets root lower it
            pass

    def _release_spawn(self) -> int:
        """Kill pid 1's children stopped before running their program (still pid 1's own program, by
        name): pid 1 waits inside posix_spawn for such a child, so one the agent stopped would hold it.
        The command then ends killed, as any command the agent stops and the harness times out. From the
        host, which the agent's signals cannot reach; how many it killed."""
        own = _proc_stat(self.init_pid) if self.init_pid else None
        if own is None:
            return 0
        killed = 0
        for entry in os.scandir("/proc"):
            seen = _proc_stat(entry.name) if entry.name.isdigit() else None
            if seen is None:
                continue
            name, state, ppid = seen
            if state in ("T", "t") and ppid == str(self.init_pid) and name == own[0]:
                try:
                    os.kill(int(entry.name), signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
        if killed:
            log.warning("%s: killed %d stopped start(s) of a command that held pid 1", self.spec.name, killed)
        return killed

    def _fail_start(self) -> None:
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        err = self.proc.stderr.read().decode(errors="replace").strip()
        raise SandboxError(
            f"{self.spec.name}: bubblewrap exited ({self.proc.returncode}): {err[-800:] or 'no message'}"
        )

    def stop(self) -> None:
        if self.net is not None:
            self.net.stop()
            self.net = None
        if self.proc is not None:
            if self.proc.poll() is None:
                for pid in (self.init_pid, self.proc.pid):  # pid 1 first: its namespace dies with it
                    try:
                        os.kill(pid, signal.SIGKILL) if pid else None
                    except ProcessLookupError:
                        pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log.error("%s: bubblewrap did not exit after SIGKILL", self.spec.name)
            self.proc.stderr.close()
        if self.chan is not None:
            self.chan.close()
            self.chan = None
        for fd in self.ns.values():
            os.close(fd)
        self.ns = {}
        if self.lease is not None:
            # belt and braces: anything of the sandbox's uid left outside its namespace
            kill_uid(self.lease.uid, self.tools["setpriv"])
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self.lease is not None:
            self.lease.release()
            self.lease = None
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
        self.proc = None

    @classmethod
    def sweep(cls, run_id: str) -> int:
        """What killed runs left: sandbox directories and cgroups of harness processes that are gone."""
        return sweep_dirs() + cgroups.sweep()

    def alive(self) -> bool:
        """bubblewrap runs and its pid 1 has not ended (a dead init is a zombie until bubblewrap reaps it)."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        seen = _proc_stat(self.init_pid)
        if seen is None:
            return not self.init_pid  # still starting
        if seen[1] in ("Z", "X"):
            try:
                self.proc.wait(timeout=5)  # bubblewrap follows its child: take its exit status
            except subprocess.TimeoutExpired:
                pass
            return False
        return True

    # -- operations -----------------------------------------------------------------------------

    def _enter(self, cwd: str, privileged: bool) -> list[str]:
        # as root, become the sandbox's root (nsenter's default); an ordinary user already is it (its uid
        # is the one mapped to 0), and may not call setgroups in a namespace bubblewrap made
        keep = [] if self.lease else ["--preserve-credentials"]
        ns = (f"{NAMESPACES[n]}=/proc/self/fd/{fd}" for n, fd in self.ns.items())
        argv = [self.tools["nsenter"], *ns, *keep, f"--wdns={cwd}", "--"]
        if not privileged:
            argv += [self.tools["setpriv"], "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs", "--"]
        return argv

    def run_from_host(self, argv, cwd="/", input=None, timeout=None, privileged=False) -> hostexec.HostResult:
        """One command entered from the host, outside the cgroup; `privileged` keeps root's capabilities
        inside the sandbox (set-up steps only, never while an agent process lives)."""
        if not self.alive():
            raise SandboxError(f"{self.spec.name}: the sandbox is not running")
        full = [*self._enter(cwd, privileged), *argv]
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            return hostexec.run_capped(
                full, dict(HOST_ENV), 1 << 20, deadline, input, tuple(self.ns.values())
            )
        except OSError as e:
            raise SandboxError(f"{self.spec.name}: starting {full[0]} failed: {e}") from None

    def exec(self, argv, timeout=None, env=None, cwd=None, input=None, max_bytes=1 << 20) -> ExecResult:
        if isinstance(argv, str):
            argv = ["bash", "-c", argv]
        if not self.alive() or self.chan is None:
            raise SandboxError(f"{self.spec.name}: the sandbox is not running")
        full_env = {
            "PATH": PATH,
            "HOME": "/root",
            "LANG": "C.UTF-8",
            "TERM": "xterm-256color",
            **self.image_env(),
            **(env or {}),
        }
        r = self.chan.run(list(argv), full_env, cwd or self.workdir, input, max_bytes, timeout)
        return ExecResult(
            r.rc, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace"), r.killed
        )

    def settle(self, seconds: float) -> bool:
        try:  # the init scans /proc itself: no process to start (a fork bomb may leave no slot)
            return self.chan is not None and self.chan.call("settle", seconds + 10, seconds=seconds)
        except SandboxError:
            return False

    def foreground(self, pid: int) -> tuple[bool, bool] | None:
        try:  # pid 1 reads /proc itself and answers with numbers: no shell started for a look
            if self.chan is None:
                return None
            got = self.chan.ask("foreground", "found", 20, pid=int(pid))
        except SandboxError:
            return None
        return bool(got["found"]), bool(got["asleep"])

    def kill_agent(self) -> None:
        """pid 1 kills everything else; if it cannot say it did (stuck at the memory limit), the host
        enters the sandbox from outside its cgroup and does it."""
        try:
            if self.chan is not None and self.chan.call("killall", 20):
                return
        except SandboxError as e:
            log.warning(
                "%s: pid 1 did not kill the agent's processes (%s): killing them from the host",
                self.spec.name,
                e,
            )
        r = self.run_from_host(["sh", "-c", KILL_ALL], timeout=30)
        if r.rc != 0:
            raise SandboxError(f"{self.spec.name}: {r.stderr.decode(errors='replace').strip()[-300:]}")

    def reset_for_grading(self, tests_archive: bytes) -> str:
        size = f"size={self.spec.storage_mb << 20}"
        script = f"""set -e; umask 022
mount -n -t tmpfs -o {size},mode=0755 horizon-tests /tests
mount -n -t tmpfs -o {size},mode=0755 horizon-logs /logs
mount -n -t tmpfs -o size={self.spec.memory_mb << 20},mode=0700 horizon-home {self.grader_home}
mkdir /logs/verifier /logs/agent
tar -x --no-same-owner -C /tests"""
        r = self.run_from_host(["sh", "-c", script], input=tests_archive, privileged=True, timeout=120)
        if r.rc != 0:
            raise SandboxError(
                f"{self.spec.name}: putting the tests in failed: {r.stderr.decode(errors='replace')[-500:]}"
            )
        listed = "".join(f"{p}\n" for p in getattr(self, "_guard_list", []) if "\n" not in p)
        if listed:  # the pytest guard's list (the toolchain is read-only: it goes to /logs)
            r = self.run_from_host(
                ["sh", "-c", f"cat > /logs/{GUARD_FILE}"], input=listed.encode(), privileged=True
            )
            if r.rc != 0:
                raise SandboxError(f"{self.spec.name}: writing the pytest guard's list failed")
        return self.grader_home

    def clear_grading(self) -> None:
        r = self.run_from_host(
            ["sh", "-c", f"umount -n -l /tests /logs {self.grader_home}"], privileged=True, timeout=30
        )
        if r.rc != 0:
            raise SandboxError(
                f"{self.spec.name}: clearing /tests and /logs failed: {r.stderr.decode(errors='replace')[-300:]}"
            )

    def diagnose(self) -> Diagnosis:
        cg = self.cgroup
        counters = cg.counters() if cg else {}
        seen = ", ".join(f"{k} {v}" for k, v in counters.items()) if cg else "rlimits, no cgroup"
        full, rc, why = [], None, ""
        ending = not self.alive()
        if not ending:
            try:
                probe = self.exec(["true"], timeout=10, cwd="/")
                rc, why = probe.rc, ("timed out" if probe.timed_out else probe.stderr.strip()[-300:])
            except SandboxError as e:
                rc, why = None, str(e)
                # its channel broke (pid 1 is ending, and bubblewrap with it), or it ended during the probe
                ending = "init" in why or not self.alive()
            full = cg.full(before=counters) if cg is not None else []
        if ending:  # say how it ended, not that it is up
            self._wait_for_exit(5)  # bubblewrap reaps a dead init a moment later; its status says how
            if not self.alive():
                return self._ended(seen)
        if rc == 0 and why == "" and not full:
            return Diagnosis("healthy", f"the sandbox is up and runs commands ({seen})")
        if full or (cg is None and "Resource temporarily unavailable" in why):
            at = ", ".join(full) or "RLIMIT_NPROC"
            return Diagnosis("exhausted", f"the sandbox is at its limits ({at}; {seen}); `true`: {rc} {why}")
        return Diagnosis("lost", f"the sandbox is up but `true` cannot run in it ({rc}: {why}; {seen})")

    def _wait_for_exit(self, seconds: float) -> None:
        if self.proc is not None:
            try:
                self.proc.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                pass

    def _ended(self, seen: str) -> Diagnosis:
        rc = None if self.proc is None else self.proc.returncode
        how = (
            f"was killed by signal {rc - 128}" if rc and rc > 128 else f"exited ({rc})"
        )  # bwrap: 128 + signal
        if self.cgroup is not None and self.cgroup.counters()["oom_kills"]:
            return Diagnosis(
                "exhausted", f"the sandbox {how} after its memory limit OOM-killed processes ({seen})"
            )
        why = (
            f"the sandbox's pid 1 (immune to signals from inside) {how} while the harness had not stopped it"
        )
        return Diagnosis("lost", f"{why} ({seen})")


def _proc_stat(pid) -> tuple[str, str, str] | None:
    """(name, state, parent pid) of a host process from one read of its stat line; None when it is gone
    (or not yet known)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name, _, rest = text.partition(" (")[2].rpartition(") ")
    fields = rest.split()[:2]
    return (name, *fields) if len(fields) == 2 else None


def _read_all(fd: int, deadline: float) -> bytes:
    data = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            return data
        data += chunk
    return data
