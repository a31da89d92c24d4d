"""Limits per sandbox: one cgroup per sandbox for memory, processes and CPU (cgroup v1 or v2).

The harness (as root) creates the cgroup, every process of the sandbox joins it before it runs
(bubblewrap at start, each `exec` before it enters the sandbox), and stop() removes it. Where it is
created, so that limits set above the harness (a Slurm job's, a container's) still apply:

- v1 (one hierarchy per controller): under the harness's own cgroup in the memory, pids and cpu
  hierarchies (v1 allows processes in inner cgroups);
- v2 (one hierarchy): under the nearest ancestor of the harness's cgroup whose `cgroup.subtree_control`
  delegates memory, pids and cpu (the harness's own cgroup holds processes, so v2 forbids
  controllers below it), or the root of the hierarchy.

Where none can be written (not root, no delegation) `create` raises CgroupsUnavailable saying why;
the local sandbox then stops, or falls back to per-process rlimits when told to (docs/evaluation/security.md).
Each cgroup's name carries the harness's pid: `sweep` removes those of harness processes that died.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from pathlib import Path

from horizon.eval.sandbox import SandboxError

CONTROLLERS = ("memory", "pids", "cpu")
PREFIX = "horizon-sb-"
CPU_PERIOD_US = 100_000


class CgroupsUnavailable(SandboxError):
    """No cgroup with the memory, pids and cpu controllers can be created here (the message says why)."""


def _mounts(mountinfo: str) -> tuple[Path | None, dict[str, Path]]:
    """(the cgroup v2 mount, {v1 controller: its mount}) from /proc/self/mountinfo."""
    v2, v1 = None, {}
    for line in Path(mountinfo).read_text().splitlines():
        pre, _, post = line.partition(" - ")
        fields, post = pre.split(), post.split()
        if len(fields) < 5 or len(post) < 3:
            continue
        if post[0] == "cgroup2" and v2 is None:
            v2 = Path(fields[4])
        elif post[0] == "cgroup":
            for opt in post[2].split(","):
                if opt in CONTROLLERS and fields[3] == "/":
                    v1.setdefault(opt, Path(fields[4]))
    return v2, v1


def _own_paths(proc_cgroup: str) -> tuple[str | None, dict[str, str]]:
    """(this process's v2 cgroup path, {v1 controller: its path}) from /proc/self/cgroup."""
    v2, v1 = None, {}
    for line in Path(proc_cgroup).read_text().splitlines():
        hid, ctrls, path = line.split(":", 2)
        if hid == "0" and ctrls == "":
            v2 = path
        for c in ctrls.split(","):
            if c in CONTROLLERS:
                v1[c] = path
    return v2, v1


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as e:
        raise CgroupsUnavailable(f"cannot write {value.strip()!r} to {path}: {e.strerror}") from None


def _v2_parent(mount: Path, own: str) -> Path:
    """The nearest cgroup at or above `own` that delegates memory, pids and cpu to its children."""
    here = mount / own.lstrip("/")
    for cand in (here, *here.parents):
        if cand != mount and mount not in cand.parents:
            break
        enabled = set(_read(cand / "cgroup.subtree_control").split())
        if set(CONTROLLERS) <= enabled and os.access(cand, os.W_OK):
            return cand
        if cand == mount and os.access(cand / "cgroup.subtree_control", os.W_OK):  # the root may enable them
            _write(cand / "cgroup.subtree_control", " ".join(f"+{c}" for c in CONTROLLERS))
            if not set(CONTROLLERS) <= set(_read(cand / "cgroup.subtree_control").split()):
                raise CgroupsUnavailable(
                    f"cgroup v2 at {mount}: enabling {', '.join(CONTROLLERS)} in its root did not take"
                )
            return cand
    raise CgroupsUnavailable(
        f"cgroup v2 at {mount}: no cgroup at or above {own} delegates {', '.join(CONTROLLERS)} "
        "(cgroup.subtree_control) and can be written by this user"
    )


class Cgroup:
    """One sandbox's cgroup: a directory per v1 controller, or one v2 directory."""

    def __init__(self, version: int, dirs: dict[str, Path]):
        self.version, self.dirs = version, dirs

    @classmethod
    def create(
        cls,
        name: str,
        memory_mb: int,
        max_processes: int,
        cpus: float,
        mountinfo: str = "/proc/self/mountinfo",
        proc_cgroup: str = "/proc/self/cgroup",
    ) -> Cgroup:
        leaf = f"{PREFIX}{os.getpid()}-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)[:40]}-{uuid.uuid4().hex[:6]}"
        v2_mount, v1_mounts = _mounts(mountinfo)
        v2_own, v1_own = _own_paths(proc_cgroup)
        if all(c in v1_mounts and c in v1_own for c in CONTROLLERS):
            dirs = {c: v1_mounts[c] / v1_own[c].lstrip("/") / leaf for c in CONTROLLERS}
            version = 1
        elif v2_mount is not None and v2_own is not None:
            parent = _v2_parent(v2_mount, v2_own)
            dirs = {c: parent / leaf for c in CONTROLLERS}
            version = 2
        else:
            raise CgroupsUnavailable(
                "no cgroup hierarchy with the memory, pids and cpu controllers is mounted"
            )
        made = cls(version, {})
        try:
            for c, d in dirs.items():
                if d not in made.dirs.values():
                    try:
                        d.mkdir()
                    except OSError as e:
                        raise CgroupsUnavailable(f"cannot create the cgroup {d}: {e.strerror}") from None
                made.dirs[c] = d
            made._limit(memory_mb << 20, max_processes, cpus)
        except BaseException:
            made.remove(timeout=1.0)
            raise
        return made

    def _limit(self, memory: int, pids: int, cpus: float) -> None:
        quota = max(1000, int(cpus * CPU_PERIOD_US))
        m, p, c = self.dirs["memory"], self.dirs["pids"], self.dirs["cpu"]
        if self.version == 1:
            _write(m / "memory.limit_in_bytes", str(memory))
            if (m / "memory.memsw.limit_in_bytes").exists():  # no swapping around the limit
                _write(m / "memory.memsw.limit_in_bytes", str(memory))
            _write(c / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            _write(c / "cpu.cfs_quota_us", str(quota))
        else:
            _write(m / "memory.max", str(memory))
            if (m / "memory.swap.max").exists():
                _write(m / "memory.swap.max", "0")
            _write(c / "cpu.max", f"{quota} {CPU_PERIOD_US}")
        _write(p / "pids.max", str(pids))

    @property
    def procs_files(self) -> list[str]:
        """Where a process writes its pid to join (one file per distinct directory)."""
        return [str(d / "cgroup.procs") for d in dict.fromkeys(self.dirs.values())]

    def join(self, pid: int) -> None:
        for f in self.procs_files:
            _write(Path(f), str(pid))

    def counters(self) -> dict[str, int]:
        """How often the sandbox hit its limits: the evidence when something inside failed."""
        m, p = self.dirs["memory"], self.dirs["pids"]
        out = {"pids_current": _int(_read(p / "pids.current")), "pids_max": _int(_read(p / "pids.max"))}
        out["pids_limit_hits"] = _field(_read(p / "pids.events"), "max")
        if self.version == 1:
            out["memory_current"] = _int(_read(m / "memory.usage_in_bytes"))
            out["memory_max"] = _int(_read(m / "memory.limit_in_bytes"))
            out["oom_kills"] = _field(_read(m / "memory.oom_control"), "oom_kill")
            out["memory_limit_hits"] = _int(_read(m / "memory.failcnt"))
        else:
            events = _read(m / "memory.events")
            out["memory_current"] = _int(_read(m / "memory.current"))
            out["memory_max"] = _int(_read(m / "memory.max"))
            out["oom_kills"] = _field(events, "oom_kill")
            out["memory_limit_hits"] = _field(events, "max")
        return out

    def full(self, before: dict[str, int] | None = None) -> list[str]:
        """The limits the sandbox is at right now (a fork bomb holds every process slot).

        With `before` (counters read a moment earlier), forks refused since then count too: a fork
        bomb's processes die and respawn, so one look at the count can fall in a dip."""
        c = self.counters()
        out = []
        refused = c["pids_limit_hits"] - before["pids_limit_hits"] if before else 0
        if c["pids_max"] and c["pids_current"] >= c["pids_max"] - 2:
            out.append(f"processes {c['pids_current']} of {c['pids_max']}")
        elif refused > 0:
            out.append(f"processes: {refused} forks refused at {c['pids_max']} while checking")
        if c["memory_max"] and c["memory_current"] >= 0.95 * c["memory_max"]:
            out.append(f"memory {c['memory_current'] >> 20} of {c['memory_max'] >> 20} MB")
        return out

    def remove(self, timeout: float = 5.0) -> None:
        """Remove the cgroup once its processes are gone (they die with the sandbox's pid namespace)."""
        for d in dict.fromkeys(self.dirs.values()):
            _rmdir(d, timeout)
        self.dirs = {}


def join_prefix(cgroup: Cgroup | None) -> list[str]:
    """The host-side start of a command line that must run in `cgroup`: join it first (None: nothing)."""
    if cgroup is None:
        return []
    files = cgroup.procs_files
    writes = " && ".join(f'echo $$ > "${i + 1}"' for i in range(len(files)))
    script = f'{writes} && shift {len(files)} && exec "$@"'
    return ["/bin/sh", "-c", script, "horizon-join", *files]


def _int(text: str) -> int:
    text = text.strip()
    return int(text) if text.isdigit() else 0


def _field(text: str, key: str) -> int:
    m = re.search(rf"^{key} (\d+)$", text, re.M)
    return int(m.group(1)) if m else 0


def _rmdir(d: Path, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        try:
            for child in sorted(d.glob(f"{PREFIX}*"), reverse=True):  # nothing of ours nests, but be safe
                _rmdir(child, 0)
            d.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)


def sweep(mountinfo: str = "/proc/self/mountinfo", proc_cgroup: str = "/proc/self/cgroup") -> int:
    """Remove the cgroups of sandboxes whose harness process is gone (a killed run); the count removed."""
    v2_mount, v1_mounts = _mounts(mountinfo)
    v2_own, v1_own = _own_paths(proc_cgroup)
    bases = [v1_mounts[c] / v1_own[c].lstrip("/") for c in CONTROLLERS if c in v1_mounts and c in v1_own]
    if v2_mount is not None and v2_own is not None:
        here = v2_mount / v2_own.lstrip("/")
        bases += [p for p in (here, *here.parents) if p == v2_mount or v2_mount in p.parents]
    removed = 0
    for base in dict.fromkeys(bases):
        for d in base.glob(f"{PREFIX}*"):
            owner = d.name[len(PREFIX) :].split("-", 1)[0]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists() and _rmdir(d, 1.0):
                removed += 1
    return removed
