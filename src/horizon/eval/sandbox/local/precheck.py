"""What the local sandbox cannot run, found from a task's files without running anything.

`static_reasons` is what `horizon check-tasks --sandbox local` prints for a task and what a local
sandbox checks before it stages anything, so that a task it would skip is named before a run:
- what the Dockerfile asks that the replay does not reproduce (horizon.eval.tasks.dockerfile.Plan);
- `apt-get install` of a package the host (the stand-in image) lacks;
- COPY/ADD sources that are not in the build context, or that this process cannot read (Docker's
  daemon reads them as root; a harness that is not root cannot);
- files or a WORKDIR under /proc, /dev, /sys or /run, which the sandbox keeps for itself;
- a FROM image the host cannot stand in for: another distribution's (alpine, fedora...: another
  package manager and libc), or a language image whose toolchain the host lacks (golang: `go`);
- where the build gets no layer of its own over the system directories (syslayer.available: a
  harness that is not root, a kernel without idmapped mounts), what needs one: a COPY/ADD after the
  first RUN into them (before it, the files are staged into an overlay of them) and users made by a
  RUN (useradd, adduser, groupadd: /etc/passwd is then the host's, read-only). With the layer, a RUN
  may write anywhere, and users may be made; a USER other than root stays unsupported (the
  sandbox's only user is root: dockerfile.plan).
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from horizon.eval.sandbox import Unsupported
from horizon.eval.sandbox.local import syslayer
from horizon.eval.tasks import dockerfile as df

SYSTEM = ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
KEPT = ("proc", "dev", "sys", "run")  # the sandbox's own: nothing of a task goes there
APT_WORDS = {"apt-get", "apt"}
# distributions the host (Debian's family) cannot stand in for: another package manager, often another libc
OTHER_DISTROS = {
    "alpine", "fedora", "centos", "rockylinux", "almalinux", "amazonlinux", "oraclelinux", "archlinux",
    "opensuse", "photon", "clearlinux", "gentoo", "busybox", "scratch", "ubi8", "ubi9",
}  # fmt: skip
# language images -> the program the host must have to stand in for them
LANGUAGE_IMAGES = {
    "golang": "go", "node": "node", "rust": "cargo", "openjdk": "java", "eclipse-temurin": "java",
    "amazoncorretto": "java", "maven": "mvn", "gradle": "gradle", "ruby": "ruby", "r-base": "R",
    "php": "php", "swift": "swift", "julia": "julia", "haskell": "ghc", "elixir": "elixir", "erlang": "erl",
    "perl": "perl", "gcc": "gcc", "sdk": "dotnet", "bun": "bun", "deno": "deno",
}  # fmt: skip
USER_TOOLS = {"useradd", "adduser", "groupadd", "addgroup", "usermod"}


@functools.lru_cache(maxsize=1)
def host_packages() -> frozenset[str]:
    """The host's installed Debian packages (the stand-in image's), asked once per process."""
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Package}\n"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    return frozenset(out.stdout.split())


def simple_commands(command: str) -> Iterator[list[str]]:
    """The words of each command of a shell line split at `&&`, `||`, `;` and `|` (one shlex cannot read:
    skipped)."""
    for part in re.split(r"&&|\|\||;|\|", command):
        try:
            yield shlex.split(part)
        except ValueError:
            continue


def apt_packages(command: str) -> list[str]:
    """Packages an `apt-get install` / `apt install` in a RUN line asks for (words, options dropped)."""
    out = []
    for words in simple_commands(command):
        while words and "=" in words[0] and not words[0].startswith("-"):  # VAR=value prefixes
            words.pop(0)
        if len(words) > 1 and os.path.basename(words[0]) in APT_WORDS:
            rest = [w for w in words[1:] if not w.startswith("-")]
            if rest[:1] == ["install"]:
                out += [re.split(r"[=:]", w)[0] for w in rest[1:]]
    return out


def static_reasons(
    plan: df.Plan,
    packages: frozenset[str] | set[str] | None = None,
    context: Path | None = None,
    layer: bool | None = None,
) -> list[str]:
    """What makes the task unsupported before anything runs; `context`: its build context (the COPY
    sources are checked there); `layer`: whether the build gets a writable layer over the system
    directories (None: whether this process can give it one, syslayer.available)."""
    layer = syslayer.available() if layer is None else layer
    reasons = list(plan.unsupported)
    packages = host_packages() if packages is None else packages
    for s in plan.steps:
        if s.kind == "RUN" and packages:
            missing = [p for p in apt_packages(s.text) if p not in packages]
            if missing:
                reasons.append(
                    f"{plan.file}: line {s.line}: RUN: apt-get install of {', '.join(missing)}, "
                    "which the host (the stand-in image) lacks"
                )
    reasons += base_reasons(plan) + ([] if layer else user_reasons(plan)) + place_reasons(plan, layer)
    reasons += owner_reasons(plan)
    return reasons + (source_reasons(plan, Path(context)) if context else [])


def image_name(base: str) -> str:
    """The bare name of an image reference: `docker.io/library/golang:1.22@sha256:..` -> `golang`."""
    return base.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0].lower()


def base_reasons(plan: df.Plan, which=shutil.which) -> list[str]:
    """A FROM image the host's userland cannot stand in for."""
    name, where = image_name(plan.base), f"{plan.file}: FROM {plan.base}"
    if name.split("-", 1)[0] in OTHER_DISTROS or name in OTHER_DISTROS:
        return [f"{where}: another distribution's image (the host's Debian userland stands in for FROM)"]
    tool = LANGUAGE_IMAGES.get(name)
    if tool and which(tool) is None:
        return [f"{where}: a {name} image, and the host (which stands in for it) has no {tool}"]
    return []


def user_reasons(plan: df.Plan) -> list[str]:
    """RUN steps that make users or groups, where the build has no layer of its own over /etc."""
    out = []
    for s in plan.steps:
        if s.kind != "RUN":
            continue
        found = sorted({w for w in re.split(r"[\s;&|()]+", s.text) if os.path.basename(w) in USER_TOOLS})
        if found:
            out.append(
                f"{plan.file}: line {s.line}: RUN: {', '.join(found)}: users other than root "
                "(/etc/passwd is the host's, read-only: the build has no layer of its own over it "
                "without root and idmapped mounts)"
            )
    return out


def chown_owners(command: str) -> list[str]:
    """The owners a RUN line gives files with chown/chgrp that are not root (`chown -R agent:agent /app`)."""
    out = []
    for words in simple_commands(command):
        for i, w in enumerate(words):
            if os.path.basename(w) in ("chown", "chgrp"):
                owner = next((x for x in words[i + 1 :] if not x.startswith("-")), "")
                names = [n for n in re.split(r"[:.]", owner) if n]
                if (
                    owner
                    and not owner.startswith("--reference")
                    and any(n not in ("root", "0") for n in names)
                ):
                    out.append(owner)
    return out


def owner_reasons(plan: df.Plan) -> list[str]:
    """RUN steps that give files to a user other than root: the sandbox maps only root (chown fails)."""
    out = []
    for s in plan.steps:
        owners = chown_owners(s.text) if s.kind == "RUN" else []
        if owners:
            out.append(
                f"{plan.file}: line {s.line}: RUN: chown to {', '.join(owners)}: files of a user other than "
                "root (the sandbox maps only root)"
            )
    return out


def sources(context: Path, pattern: str, where: str) -> list[Path]:
    """The build-context files a COPY/ADD source pattern names (Docker's wildcards)."""
    found = sorted(Path(p) for p in glob.glob(str(context / pattern.lstrip("/"))))
    if not found:
        raise Unsupported(f"{where}: {pattern}: no such file in the build context", "local")
    for p in found:
        if not p.resolve().is_relative_to(context.resolve()):
            raise Unsupported(f"{where}: {pattern} is outside the build context", "local")
    return found


def unreadable_reason(name: str) -> str:
    return (
        f"{name} in the build context is not readable by uid {os.getuid()} (Docker's daemon reads it as "
        "root): run the harness as root, or make it readable"
    )


def first_unreadable(path: Path) -> Path | None:
    """The first file or directory under `path` (itself included) this process cannot read."""

    def blocked(p: Path) -> bool:
        need = os.R_OK | os.X_OK if p.is_dir() else os.R_OK
        return not p.is_symlink() and not os.access(p, need)

    if blocked(path):
        return path
    for dirpath, dirnames, filenames in os.walk(path) if path.is_dir() else ():
        for n in dirnames + filenames:
            if blocked(Path(dirpath) / n):
                return Path(dirpath) / n
    return None


def source_reasons(plan: df.Plan, context: Path) -> list[str]:
    """COPY/ADD sources missing from the build context, or that this process cannot read."""
    out = []
    for s in plan.steps:
        if s.kind not in ("COPY", "ADD") or len(s.args) < 2:
            continue
        where = f"{plan.file}: line {s.line}: {s.kind}"
        for pattern in s.args[:-1]:
            try:
                found = sources(context, pattern, where)
            except Unsupported as e:
                out.append(e.reason)
                continue
            bad = next((b for p in found if (b := first_unreadable(p)) is not None), None)
            if bad is not None:
                out.append(f"{where}: {unreadable_reason(str(bad.relative_to(context)))}")
    return out


def top_of(path: str) -> str:
    """The host's top-level directory `path` lands in (a symlink such as /bin -> usr/bin followed)."""
    top = path.strip("/").split("/", 1)[0]
    host = Path("/") / top
    return os.readlink(host).strip("/").split("/", 1)[0] if top and host.is_symlink() else top


def place_reasons(plan: df.Plan, layer: bool = False) -> list[str]:
    """Files or a WORKDIR where the sandbox cannot put them (`layer`: the build may write the system
    directories)."""
    out, after_run = [], False
    for s in plan.steps:
        after_run = after_run or s.kind == "RUN"
        if s.kind not in ("COPY", "ADD", "WORKDIR") or not s.args:
            continue
        dest, where = s.args[-1], f"{plan.file}: line {s.line}: {s.kind}"
        top = top_of(dest)
        if top in KEPT:
            out.append(f"{where}: {dest} is under /{top}, which the sandbox keeps for itself")
        elif after_run and top in SYSTEM and not layer and not (s.kind == "WORKDIR" and os.path.isdir(dest)):
            out.append(
                f"{where}: {dest} after a RUN: the host's system directories (/{top}) are read-only while "
                "the build runs without root and idmapped mounts (only files copied before the first RUN "
                "are staged into them)"
            )
    return out
