"""The build's copy-on-write layer over the host's system directories: a Dockerfile's RUN may write anywhere.

A Docker build writes into its image wherever it likes (`ln -s … /usr/bin/python`, `pip install` into
the system's site-packages, `useradd`, /etc/x.conf). Here the host's userland stands in for the image,
and the host's /usr and /etc must never change, so while the RUN steps run each system top-level
directory T that is a directory on the host (/usr, /etc; /bin, /lib... where they are not links) is
an overlay:
- lower: the host's T through an idmapped mount (mapped into the sandbox's user namespace: what the
  host's root owns reads as the sandbox's root's, so that root inside may change it; the host's T
  sees none of it), under a mask of the harness's making (root/mask/T): over /etc, a
  whiteout on each entry only the host's root may read (keys, the host's own secrets: a Docker
  image has none of them) and shadow and gshadow with every password locked; over /usr, for a FROM
  python image, a whiteout on the host Python's EXTERNALLY-MANAGED (Docker's python images have
  none, so `pip install` into the system works there);
- upper: root/layer/T on the host's disk (the sandbox's own directory, its uid's), bounded by the
  task's `storage_mb` (`check_size`, when the build ends: the build is the task's, not the agent's);
  where the disk cannot hold an overlay's upper layer (an overlayfs /tmp), the sandbox's storage
  tmpfs (UPPERS).
After the build (`seal_lines`), each T is a read-only overlay of the build's layer over the host's
plain T: the agent sees the build's files (root's) and the host's (nobody's, as before), and can
change none of them; the layer's directory leaves the sandbox's view. The integrity audit reads this
view from the host (audit.View), so what the build wrote is the image's side of every comparison.

The harness runs a few programs inside the sandbox as its root after the agent (mounting /tests,
unpacking the tests): `check_helpers` refuses a build that made one of them (or the loader's preload)
a path the agent could write.

Needs root (an idmapped mount of the host's directories; Linux >= 5.19 for an overlay over one):
`available()` tries it once per process. Elsewhere the system directories stay read-only while the
build runs, and precheck names the steps that need them.

Imports: the sandbox protocol, integrity (resolve).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

from horizon.eval.sandbox import SandboxError, Unsupported
from horizon.eval.sandbox.integrity import resolve
from horizon.eval.sandbox.overlay import allocated_bytes

log = logging.getLogger("horizon.eval.sandbox")
SYSTEM = ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
LAYER = "/run/horizon/layer"  # root/layer inside, while the build runs and until it is sealed
SYS = "/run/horizon/sys"  # the idmapped host directories, until the build's overlays hold them
MASK = "/run/horizon/mask"  # root/mask inside, likewise: what the build does not see of the host's
SECRETS = ("shadow", "gshadow", "shadow-", "gshadow-")  # locked copies in the build's /etc
# what the harness runs as root inside the sandbox after the agent (reset_for_grading, clear_grading)
HELPERS = ("sh", "mount", "umount", "mkdir", "tar", "cat")
HELPER_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")

# run on the host by a fresh, single-threaded python: argv = user-namespace fd (-1: a plain bind),
# mount-namespace fd (-1: only try), then pairs of (host directory, mount point inside).
# open_tree(CLONE) + mount_setattr(IDMAP|RDONLY) + setns(mount namespace) + move_mount: the syscalls'
# numbers are the same on every architecture
IDMAP = r"""
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def call(what, r):
    if r < 0:
        e = ctypes.get_errno(); sys.exit(f"{what}: {os.strerror(e)}")
    return r
userns, mntns, pairs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
trees = []
for src in pairs[0::2]:
    fd = call(f"open_tree {src}", libc.syscall(428, -100, src.encode(), 1 | os.O_CLOEXEC))
    if userns >= 0:  # else a plain bind
        attr = ctypes.create_string_buffer(struct.pack("QQQQ", 0x100000 | 1, 0, 0, userns))
        call(f"mount_setattr {src}", libc.syscall(442, fd, b"", 0x1000, attr, 32))
    trees.append(fd)
if mntns >= 0:
    call("setns", libc.setns(mntns, 0x20000))
    for fd, dst in zip(trees, pairs[1::2]):
        call(f"move_mount {dst}", libc.syscall(429, fd, b"", -100, dst.encode(), 4))
"""


def tops() -> list[str]:
    """The system top-level directories that are directories on the host (not links such as /bin)."""
    return [t for t in SYSTEM if (Path("/") / t).is_dir() and not (Path("/") / t).is_symlink()]


def _idmap(userns: int, mntns: int, pairs: list[tuple[str, str]]) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-I", "-S", "-c", IDMAP, str(userns), str(mntns)]
    argv += [p for pair in pairs for p in pair]
    fds = tuple(fd for fd in (userns, mntns) if fd >= 0)
    return subprocess.run(argv, pass_fds=fds, capture_output=True, text=True, timeout=30)


@functools.cache
def available() -> bool:
    """Whether this process can give a build its writable layer: root, and a kernel that idmaps the
    host's directories (tried once, on a user namespace of a throwaway process)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    child = subprocess.Popen(
        ["unshare", "--user", "--map-root-user", "sleep", "30"], stdin=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 10
        while os.readlink(f"/proc/{child.pid}/ns/user") == os.readlink("/proc/self/ns/user"):
            if time.monotonic() > deadline or child.poll() is not None:  # until it is in its namespace
                raise OSError(f"unshare --user did not start a user namespace ({child.poll()})")
            time.sleep(0.005)
        fd = os.open(f"/proc/{child.pid}/ns/user", os.O_RDONLY)
        try:
            r = _idmap(fd, -1, [(f"/{t}", "") for t in tops()])
        finally:
            os.close(fd)
    except OSError as e:
        log.warning("no writable layer for builds (the system directories stay read-only): %s", e)
        return False
    finally:
        child.kill()
        child.wait()
    if r.returncode != 0:
        log.warning(
            "no writable layer for builds (the system directories stay read-only): %s", r.stderr.strip()
        )
    return r.returncode == 0


def _locked(text: str) -> str:
    """shadow or gshadow with every password field locked (`*`): the host's hashes stay the host's."""
    out = []
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        out.append(f"{name}:*:{rest.partition(':')[2]}" if sep else line)
    return "".join(f"{line}\n" for line in out)


def _hide_private(host: Path, upper: Path) -> None:
    """A whiteout in `upper` over each entry of `host` that others may not read (or, a directory, enter)."""
    for entry in sorted(os.scandir(host), key=lambda e: e.name):
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode) or entry.name in SECRETS:
            continue
        private = st.st_mode & (0o005 if stat.S_ISDIR(st.st_mode) else 0o004) != (
            0o005 if stat.S_ISDIR(st.st_mode) else 0o004
        )
        if private:
            upper.mkdir(parents=True, exist_ok=True)
            os.mknod(upper / entry.name, stat.S_IFCHR | 0o000, 0)
        elif stat.S_ISDIR(st.st_mode):
            _hide_private(Path(entry.path), upper / entry.name)


def prepare(root: Path, python_image: bool = False) -> list[str]:
    """root/layer/T/{data,work} for each system directory, and its mask (root/mask/T, a lower layer
    over the host's T wherever the upper one lies, out of the build's reach once its overlays hold it): /etc's whiteouts and locked copies; for a
    FROM python image, a whiteout over the host Python's EXTERNALLY-MANAGED (Docker's python images
    have none: `pip install` there installs into the system, which Debian's marker refuses). The
    caller gives the tree to the sandbox's uid."""
    out = tops()
    for t in out:
        for d in ("data", "work"):
            (root / "layer" / t / d).mkdir(parents=True)
        (root / "mask" / t).mkdir(parents=True)
    if python_image and "usr" in out:
        for marker in Path("/usr/lib").glob("python3*/EXTERNALLY-MANAGED"):
            hidden = root / "mask" / "usr" / "lib" / marker.parent.name
            hidden.mkdir(parents=True, exist_ok=True)
            os.mknod(hidden / marker.name, stat.S_IFCHR | 0o000, 0)
    if "etc" in out:
        mask = root / "mask" / "etc"
        _hide_private(Path("/etc"), mask)
        for name in SECRETS:
            src = Path("/etc") / name
            if src.is_file() and not src.is_symlink():
                (mask / name).write_text(_locked(src.read_text(errors="replace")))
                (mask / name).chmod(0o640)
    return out


def attach(sb, layer: list[str]) -> None:
    """The host's system directories, idmapped into the sandbox's user namespace, at SYS/T inside."""
    r = _idmap(sb.ns["user"], sb.ns["mnt"], [(f"/{t}", f"{SYS}/{t}") for t in layer])
    if r.returncode != 0:
        raise SandboxError(f"{sb.spec.name}: the build's layer over /{layer[0]}: {r.stderr.strip()[-300:]}")


def reattach(sb) -> None:
    """root/layer at LAYER again for the seal (it left the view before the build ran: the build's
    steps never reach their upper layers but through the overlays)."""
    r = _idmap(-1, sb.ns["mnt"], [(str(sb.root / "layer"), LAYER)])
    if r.returncode != 0:
        raise SandboxError(f"{sb.spec.name}: the build's layer for its seal: {r.stderr.strip()[-300:]}")


# where the build's upper layers may lie, tried in order: the sandbox's directory on the host's disk,
# else (a disk that cannot hold one: an overlayfs /tmp) the sandbox's storage tmpfs, bounded by
# storage_mb with /app's writes
UPPERS = (LAYER, "/run/horizon/upper/.system")
# $1 the build's lower layers, $2 the directory, $3 the read-only lower layers without a build layer
# (the staged files over the host's) or nothing; a layer in use is marked `in-use` beside its data
SYSOVL = """sysovl() {
  for u in %s; do
    mkdir -p "$u/$2/data" "$u/$2/work" 2>/dev/null || continue
    o="lowerdir=$1,upperdir=$u/$2/data,workdir=$u/$2/work"
    if mount -n -t overlay -o "$o,userxattr" "horizon-$2" "/$2" 2>/dev/null ||
       mount -n -t overlay -o "$o" "horizon-$2" "/$2" 2>/dev/null; then : > "$u/$2/in-use"; return 0; fi
  done
  echo "horizon: no writable layer for /$2: the build sees it read-only" >&2
  [ -z "$3" ] || mount -n -t overlay -o "lowerdir=$3" "horizon-$2" "/$2"
}"""


def _mask(t: str) -> str:
    return f"{MASK}/{t}:"


def build_lines(layer: list[str], staged: list[str]) -> list[str]:
    """Mount-script lines: each system directory writable over its idmapped host directory (/etc's mask
    and the files staged into it before the first RUN above that), then the idmapped mounts leave the
    view."""
    lines = [SYSOVL % " ".join(UPPERS)]
    for t in layer:
        lower = (f"/run/horizon/lower/{t}:" if t in staged else "") + f"{_mask(t)}{SYS}/{t}"
        plain = f"/run/horizon/lower/{t}:/{t}" if t in staged else ""
        lines.append(f"sysovl {lower} {t} {plain}")
    lines += [f"umount -n -l {SYS}/{t}" for t in layer] + [f"umount -n -l {MASK} {LAYER}"]
    return lines


def seal_lines(layer: list[str], staged: list[str]) -> str:
    """After the build: each system directory a read-only overlay of the build's layer over the host's
    plain directory (the agent's view: what the mask hid is the host's again, which the agent cannot
    read, nobody's); the layer's directory leaves the view."""
    lines = ["for t in apt-get apt; do umount -n -l /usr/bin/$t 2>/dev/null || true; done"]
    for t in layer:
        rest = (f"/run/horizon/lower/{t}:" if t in staged else "") + f"/{t}"
        lines += [
            f'u=""; for c in {" ".join(UPPERS)}; do [ -e "$c/{t}/in-use" ] && u="$c/{t}/data" && break; done',
            f'if [ -n "$u" ]; then umount -n -l /{t}',
            f'  mount -n -t overlay -o "lowerdir=$u:{rest},userxattr" horizon-{t} /{t} 2>/dev/null || '
            f'mount -n -t overlay -o "lowerdir=$u:{rest}" horizon-{t} /{t}',
            "fi",
        ]
    if layer:
        lines.append(f"umount -n -l {LAYER}")
    return "\n".join(lines) + "\n"


def layer_bytes(root: Path) -> int:
    return allocated_bytes(root / "layer")


def check_size(root: Path, storage_mb: int, file: str) -> None:
    """The build's writes into the system directories, against the task's storage."""
    used = layer_bytes(root)
    if used > storage_mb << 20:
        raise Unsupported(
            f"{file}: the build wrote {used >> 20} MB into the system directories, more than the task's "
            f"storage ({storage_mb} MB)",
            "local",
        )


def check_helpers(view, file: str) -> None:
    """The programs the harness runs as root inside after the agent resolve into the read-only system
    directories, and the loader preloads nothing: else the agent could run its code with root's
    capabilities inside the sandbox (a build that linked /usr/bin/tar into /app)."""
    bad = []
    for name in HELPERS:
        found = None
        for d in HELPER_PATH:
            real = resolve(f"{d}/{name}", view.lookup)
            if view.lookup(real) is not None:
                found = real
                break
        top = found.strip("/").split("/", 1)[0] if found else ""
        if found is None or top not in SYSTEM:
            bad.append(f"{name} ({found or 'missing'})")
    if view.lookup("/etc/ld.so.preload") is not None:
        bad.append("/etc/ld.so.preload")
    if bad:
        raise Unsupported(
            f"{file}: the build left {', '.join(bad)} outside the read-only system directories; the harness "
            "runs these as the sandbox's root after the agent",
            "local",
        )
