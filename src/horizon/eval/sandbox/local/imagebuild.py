"""The task's Dockerfile, replayed by the local sandbox before the agent starts.

The FROM image is stood in for by the host's userland (the sandbox's read-only system directories).
Every other step is applied in order (horizon.eval.tasks.dockerfile.plan):
- the steps before the first RUN on the host: COPY/ADD of build-context files (Docker's rules: a
  directory's contents, wildcards, a local tar archive unpacked by ADD) and WORKDIR are staged into a
  directory tree that becomes the lower, read-only layer of each top-level directory they touch
  (/app, /workspace, /home...), under a writable layer for the agent (an overlay, as /app always was);
- the steps from the first RUN on inside the sandbox, as its root, before any agent process exists:
  RUN with the Dockerfile's SHELL and the ENV so far (and the network where the machine has one:
  netns.build_network), COPY/ADD (each staged on the host by the same rules as a tree of its own,
  laid over / in its turn: root:root, the sources' modes), WORKDIR; `/` is writable while they run
  and read-only after, and so are the system directories where the build has a layer of its own
  over them (syslayer.py: root and idmapped mounts). `apt-get install` of packages the host has is satisfied by the host (the
  stand-in image); one it lacks fails the step.
Staged files are owned by the sandbox's uid, its root inside: as Docker's COPY gives root:root.
- ENV becomes the environment of the agent's shell and of the tests (image_env), starting from the FROM
  image's as Docker would give it (Docker's default PATH: `ENV PATH=/opt/venv/bin:$PATH` extends it);
  ARG values are in the environment of the RUN steps after them, as in a Docker build.
A step it cannot reproduce (what precheck.static_reasons finds before anything runs, and a RUN that
fails in the sandbox: fetching without a network; without the layer, writing into the system
directories) makes
the task `Unsupported` for the local sandbox, naming the line and the reason.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from horizon.eval.sandbox import SandboxError, SandboxSpec, Unsupported
from horizon.eval.sandbox.local import audit, syslayer
from horizon.eval.sandbox.local.precheck import (
    KEPT,
    SYSTEM,
    host_packages,
    sources,
    static_reasons,
    unreadable_reason,
)
from horizon.eval.tasks import dockerfile as df

FIXED_MTIME = 1767225600  # 2026-01-01T00:00:00Z: `ls -l` of a task's files reads the same in every run
# apt-get/apt while the Dockerfile's RUN steps run: the host's packages are the stand-in image's
APT_SHIM = r"""#!/bin/sh
sub=""; for a in "$@"; do case "$a" in -*) ;; *) [ -z "$sub" ] && sub="$a" && continue; [ "$sub" = install ] && pkgs="$pkgs $a";; esac; done
case "$sub" in
  update|clean|autoclean|autoremove|upgrade|dist-upgrade) exit 0;;
  install) missing=""; for p in $pkgs; do p="${p%%=*}"; p="${p%%:*}"
             grep -qx -- "$p" /run/horizon/build/host-packages || missing="$missing $p"; done
           [ -z "$missing" ] && exit 0
           echo "horizon: the host (the local sandbox's stand-in image) lacks:$missing" >&2; exit 100;;
  *) echo "horizon: apt-get $sub is not reproduced by the local sandbox" >&2; exit 100;;
esac
"""


def set_mtimes(root: Path, when: int = FIXED_MTIME) -> None:
    """Every file and directory under `root` stamped `when` (the staged image reads the same in every run)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for n in filenames + dirnames:
            os.utime(os.path.join(dirpath, n), (when, when), follow_symlinks=False)
    os.utime(root, (when, when))


@dataclass
class LocalImage:
    """What the local sandbox starts from: staged top-level directories, the steps left to run inside."""

    tops: list[str] = field(default_factory=lambda: ["app"])  # top-level directories with a writable overlay
    env: dict[str, str] = field(default_factory=dict)
    inside: list[df.Step] = field(default_factory=list)  # from the first RUN on
    file: str = "Dockerfile"
    start_dir: str = "/"  # the WORKDIR the first RUN runs in
    start_env: dict[str, str] = field(default_factory=dict)  # the ENV set before it
    system: list[str] = field(default_factory=list)  # system directories the staged files go into (read-only)
    layer: list[str] = field(default_factory=list)  # system directories the build may write (syslayer.py)
    root_files: list[str] = field(default_factory=list)  # files staged into / itself (/entrypoint.sh)
    base: str = ""  # the FROM image the host stands in for
    # the working directory of an image whose Dockerfile sets no WORKDIR: Docker's ("/"); /app for a
    # task without a Dockerfile (its files are copied there)
    default_workdir: str = "/app"

    @property
    def writable(self) -> list[str]:
        return [t for t in self.tops if t not in self.system]


def make_dirs(path: Path) -> None:
    """`path` and its missing parents, each 0755 whatever the harness's umask (as Docker makes them)."""
    if path.is_dir():
        return
    make_dirs(path.parent)
    path.mkdir()
    path.chmod(0o755)


def _copy_one(src: Path, dest: Path, dest_is_dir: bool, add: bool) -> None:
    if src.is_dir():
        make_dirs(dest)
        shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
        return
    if add and tarfile.is_tarfile(src):  # ADD unpacks a local archive
        make_dirs(dest)
        with tarfile.open(src) as tar:
            tar.extractall(dest, filter="data")
        return
    target = dest / src.name if dest_is_dir else dest
    make_dirs(target.parent)
    shutil.copy2(src, target, follow_symlinks=False)


def stage_copy(step: df.Step, context: Path, image: Path, file: str) -> None:
    """COPY/ADD with Docker's rules, into the staged tree `image` (the filesystem's root). The files keep
    their modes; their owner becomes the sandbox's root (prepare_root), as COPY gives root:root."""
    *patterns, dest = step.args
    where = f"{file}: line {step.line}: {step.kind}"
    srcs = [p for pat in patterns for p in sources(context, pat, where)]
    dest_is_dir = dest.endswith("/") or len(srcs) > 1
    target = image / dest.lstrip("/")
    try:
        for src in srcs:
            _copy_one(src, target, dest_is_dir or src.is_dir(), step.kind == "ADD")
    except (PermissionError, shutil.Error) as e:  # shutil.Error: a tree with unreadable files
        first = e.args[0][0][0] if isinstance(e, shutil.Error) and e.args and e.args[0] else None
        raise Unsupported(f"{where}: {unreadable_reason(first or e.filename or str(e))}", "local") from None


def stage_later_copies(steps: list[df.Step], context: Path, root: Path, file: str) -> None:
    """Each COPY/ADD after the first RUN staged on the host as a tree of its own, root/build/copies/LINE,
    which the build lays over / in its turn (build_script): Docker's rules for the sources, the files'
    modes, and the owner the staged image gets (the sandbox's root)."""
    for s in steps:
        if s.kind in ("COPY", "ADD"):
            layer = root / "build" / "copies" / str(s.line)
            make_dirs(layer)
            stage_copy(s, context, layer, file)
            set_mtimes(layer)


def tops_of(plan: df.Plan, context: Path | None = None) -> list[str]:
    """The top-level directories the Dockerfile puts files or its WORKDIR in (each gets an overlay); a
    file copied to / itself (`COPY entrypoint.sh /entrypoint.sh`) is none."""
    tops = {"app"}
    for s in plan.steps:
        paths = s.args[-1:] if s.kind in ("COPY", "ADD") else s.args if s.kind == "WORKDIR" else ()
        for p in paths:
            top = p.strip("/").split("/", 1)[0]
            if top and not (s.kind != "WORKDIR" and context is not None and _root_file(s, context)):
                tops.add(top)
    return sorted(tops)


def _root_file(step: df.Step, context: Path) -> bool:
    """A COPY/ADD of one file to a name in / (Docker makes it a file there, not a directory)."""
    *patterns, dest = step.args
    if dest.endswith("/") or "/" in dest.strip("/"):
        return False
    try:
        srcs = [p for pat in patterns for p in sources(context, pat, "")]
    except Unsupported:
        return False
    one = srcs[0] if len(srcs) == 1 else None
    return one is not None and one.is_file() and not (step.kind == "ADD" and tarfile.is_tarfile(one))


def prepare(spec: SandboxSpec, root: Path) -> LocalImage:
    """Stage the Dockerfile's steps up to its first RUN under root/image; the rest is run inside."""
    if len(spec.services) > 1:
        raise Unsupported(
            f"docker-compose.yaml has {len(spec.services)} services: one sandbox runs one", "local"
        )
    image = root / "image"
    (image / "app").mkdir(parents=True)
    dockerfile = spec.dockerfile_dir / spec.dockerfile if spec.dockerfile_dir else None
    if dockerfile is None or not dockerfile.is_file():
        if spec.workdir_files:  # no Dockerfile (a prebuilt image only): the task's files, as before
            shutil.copytree(spec.workdir_files, image / "app", symlinks=True, dirs_exist_ok=True)
        return LocalImage(env=dict(spec.env))
    plan = df.plan(dockerfile, {"BASE_IMAGE": "horizon-local"})
    reasons = static_reasons(plan, context=spec.dockerfile_dir)
    if reasons:
        raise Unsupported(
            "; ".join(reasons[:3]) + (f" (and {len(reasons) - 3} more)" if len(reasons) > 3 else ""), "local"
        )
    out = LocalImage(
        tops=tops_of(plan, spec.dockerfile_dir),
        env={**plan.env, **spec.env},
        file=plan.file,
        default_workdir="/",
        base=plan.base,
    )
    steps = list(plan.steps)
    while steps and steps[0].kind != "RUN":
        s = steps.pop(0)
        if s.kind in ("COPY", "ADD"):
            stage_copy(s, spec.dockerfile_dir, image, plan.file)
        elif s.kind == "WORKDIR":
            (image / s.args[0].lstrip("/")).mkdir(parents=True, exist_ok=True)
            out.start_dir = s.args[0]
        elif s.kind in ("ENV", "ARG"):  # ARG: the RUN steps' environment only, never the image's
            out.start_env.update(dict(s.args))
    out.inside = steps
    stage_later_copies(steps, spec.dockerfile_dir, root, plan.file)
    _settle_tops(out, image, spec.workdir)
    return out


def _settle_tops(out: LocalImage, image: Path, workdir: str | None) -> None:
    """Every top-level directory as a staged tree; a host symlink (/bin -> usr/bin) is followed, and
    the ones the sandbox keeps for itself are refused."""
    if workdir:
        (image / workdir.lstrip("/")).mkdir(parents=True, exist_ok=True)
        out.tops = sorted({*out.tops, workdir.strip("/").split("/", 1)[0]} - {""})
    tops = set()
    for top in out.tops:
        if top in KEPT:
            raise Unsupported(f"{out.file}: files under /{top}, which the sandbox keeps for itself", "local")
        host = Path("/") / top
        if host.is_symlink() and (image / top).exists():
            real = os.readlink(host).strip("/").split("/", 1)[0]
            shutil.copytree(
                image / top, image / os.readlink(host).lstrip("/"), symlinks=True, dirs_exist_ok=True
            )
            shutil.rmtree(image / top)
            top = real
        (image / top).mkdir(exist_ok=True)
        tops.add(top)
    out.tops = sorted(tops)
    out.system = [t for t in out.tops if t in SYSTEM]
    out.root_files = sorted(p.name for p in image.iterdir() if p.is_file() and not p.is_symlink())


def write_build_files(root: Path) -> Path:
    """root/build: the apt shim and the host's package list, bound at /run/horizon/build while RUN steps run."""
    d = root / "build"
    (d / "bin").mkdir(parents=True)
    for name in ("apt-get", "apt"):
        (d / "bin" / name).write_text(APT_SHIM)
        (d / "bin" / name).chmod(0o755)
    (d / "host-packages").write_text("\n".join(sorted(host_packages())) + "\n")
    (d / "resolv.conf").write_text("nameserver 10.0.2.3\n")  # slirp4netns's DNS, for a build with the network
    return d


def _q(words) -> str:
    return " ".join(shlex.quote(str(w)) for w in words)


def build_script(img: LocalImage, resolver: bool = False) -> str:
    """The shell script that runs the steps left (as the sandbox's root), one numbered step at a time;
    it stops at the first that fails, saying which (`horizon-step LINE rc`). `resolver`: the build has
    a network the runtime will not (slirp4netns's DNS at /etc/resolv.conf while it runs)."""
    lines = ["umask 022", SHIM_MOUNTS]
    if resolver:
        lines.append(f"mount -n --bind {RESOLV} /etc/resolv.conf")
    for s in img.inside:
        if s.kind in ("ENV", "ARG"):
            lines += [f"export {k}={shlex.quote(v)}" for k, v in s.args]
        elif s.kind == "WORKDIR":
            lines.append(
                f"mkdir -p {shlex.quote(s.args[0])} && cd {shlex.quote(s.args[0])} || "
                f"{{ echo 'horizon-step {s.line} 1'; exit 1; }}"
            )
        elif s.kind == "RUN":
            lines.append(f'( {_q(s.args)} ) || {{ echo "horizon-step {s.line} $?"; exit 1; }}')
        elif s.kind in ("COPY", "ADD"):
            layer = f"{COPIES}/{s.line}"
            lines.append(f"horizon_copy {layer} || {{ echo 'horizon-step {s.line} 1'; exit 1; }}")
    if resolver:
        lines.append("umount -n -l /etc/resolv.conf")
    return COPY_FN + "\n".join(lines) + "\necho horizon-build-done\n"


COPIES = "/run/horizon/build/copies"  # the later COPY steps' staged trees (stage_later_copies)
# COPY inside the sandbox (after a RUN): its staged tree laid over /, owners and modes as staged (root's,
# the sources'); a directory that exists keeps its own (a RUN may have made it), a symlink to one stays
COPY_FN = r"""horizon_copy() {
  tar -C "$1" -cf - . | tar -C / -xf - --same-owner --same-permissions --no-overwrite-dir --keep-directory-symlink
}
"""


PATH = df.DEFAULT_PATH
SHIM = "/run/horizon/build/bin"  # the apt-get stand-in
RESOLV = "/run/horizon/build/resolv.conf"
# while the RUN steps run, the stand-in is bound over the host's apt-get and apt (the PATH the steps see
# is Docker's); a host without them gets it first on the PATH instead
SHIM_MOUNTS = f"""for t in apt-get apt; do
  if [ -e /usr/bin/$t ]; then mount -n --bind {SHIM}/$t /usr/bin/$t; else export PATH={SHIM}:$PATH; fi
done"""
BUILD_TAIL = 4000  # bytes of a failed Dockerfile step's output kept in the reason


# a writable overlay: user.* xattrs (userxattr, Linux >= 5.11) let a directory of the lower layer be
# removed inside a user namespace (without it, EIO); kernels without the option mount it without
OVERLAY = """ovl() { o="lowerdir=$1,upperdir=$2/data,workdir=$2/work"; mkdir "$2" "$2/data" "$2/work"
  mount -n -t overlay -o "$o,userxattr" "$3" "$4" 2>/dev/null || mount -n -t overlay -o "$o" "$3" "$4"; }"""


def mount_script(image: LocalImage, rebind_tools: bool) -> str:
    """Overlays for the staged top-level directories: writable ones over a tmpfs layer (as /app always
    was), system ones read-only over the host's; then the staging mounts go (lazily)."""
    lines = ["set -e; umask 022", OVERLAY]
    for top in image.writable:
        lines.append(f"ovl /run/horizon/lower/{top} /run/horizon/upper/{top} horizon-{top} /{top}")
    if image.layer:  # the build writes into a layer of its own over them
        lines += syslayer.build_lines(image.layer, image.system)
    else:
        lines += [
            f"mount -n -t overlay -o lowerdir=/run/horizon/lower/{top}:/{top} horizon-{top} /{top}"
            for top in image.system
        ]
    if rebind_tools:  # an overlay on /opt hid the toolchain's mount point
        lines += [
            "mkdir -p /opt/horizon",
            "mount -n --bind /run/horizon/tools /opt/horizon",
            "mount -n -o remount,bind,ro /opt/horizon",
        ]
    # files staged into / itself: copied there while / is writable (a build), else bound read-only at start
    lines += [f"cp -a /run/horizon/lower/{shlex.quote(f)} /" for f in image.root_files if image.inside]
    if not image.inside:  # a build still needs the upper layer for the directories its RUN steps make
        lines.append("umount -n -l /run/horizon/lower /run/horizon/upper")
    lines += [f"touch -h -d @{FIXED_MTIME} /{top}" for top in image.writable]
    return "\n".join(lines)


# after a build (and syslayer.seal_lines, which takes the apt-get stand-in away first): each top-level
# directory its RUN steps made gets a writable layer like the staged ones (the agent may write there, as
# in the image), then / goes read-only and the build's mounts go
SEAL = f"""set -e; umask 022
{OVERLAY}
for d in /*; do
  n=${{d#/}}; [ -d "$d" ] && [ ! -L "$d" ] || continue
  case " $* " in *" $n "*) continue;; esac
  ovl "$d" "/run/horizon/upper/$n" "horizon-$n" "$d"
done
umount -n -l /run/horizon/lower /run/horizon/upper
mount -n -o remount,bind,ro /
umount -n -l /run/horizon/build"""


def run_inside(sb, img: LocalImage, resolver: bool = False) -> None:
    """The Dockerfile's steps from its first RUN on, as the sandbox's root, before any agent process;
    a step that fails makes the task Unsupported here, naming its line and the end of its output."""
    before = sb.run_from_host(["ls", "-A", "/"], privileged=True, timeout=30).stdout.decode().split()
    env = {"PATH": PATH, "HOME": "/root", "LANG": "C.UTF-8", **img.start_env}
    script = build_script(img, resolver)
    cmd = ["env", "-i", *(f"{k}={v}" for k, v in env.items()), "sh", "-c", script]
    r = sb.run_from_host(cmd, cwd=img.start_dir, privileged=True, timeout=sb.spec.build_timeout)
    out = (r.stdout + r.stderr).decode("utf-8", "replace")
    if r.killed or "horizon-build-done" not in out:
        failed = [line.split() for line in out.splitlines() if line.startswith("horizon-step ")]
        line, rc = failed[-1][1:3] if failed else ("?", "killed" if r.killed else str(r.rc))
        why = f"timed out after {sb.spec.build_timeout:.0f} s" if r.killed else f"exited {rc}"
        tail = out.replace("horizon-step", "").strip()[-BUILD_TAIL:].strip()
        raise Unsupported(
            f"{img.file}: line {line}: the step {why} in the sandbox: ...{tail[-600:]}", "local"
        )
    known = [*img.tops, *before]
    if img.layer:
        syslayer.reattach(sb)
    seal = syslayer.seal_lines(img.layer, img.system)
    if img.layer and sb.spec.allow_internet:  # the agent's /etc hides the runtime's resolv.conf: again
        seal += f"mount -n --bind {RESOLV} /etc/resolv.conf\nmount -n -o remount,bind,ro /etc/resolv.conf\n"
    seal += SEAL
    r = sb.run_from_host(["sh", "-c", seal, "seal", *known], privileged=True, timeout=30)
    if r.rc != 0:
        raise SandboxError(
            f"{sb.spec.name}: sealing / after the build failed: {r.stderr.decode(errors='replace')[-300:]}"
        )
    if img.layer:
        syslayer.check_size(sb.root, sb.spec.storage_mb, img.file)
        syslayer.check_helpers(audit.View(sb.init_pid), img.file)
