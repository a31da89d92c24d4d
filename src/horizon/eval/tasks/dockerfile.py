"""A task's Dockerfile as the local sandbox can replay it: its steps, its last WORKDIR, its ENV.

Parsed with `dockerfile-parse` (instructions, line continuations, JSON forms, ARG/ENV contexts);
variables are expanded here as Docker expands them (`$VAR`, `${VAR}`, `${VAR:-default}`,
`${VAR:+alt}`) from the build arguments and the ENV set so far.

`plan()` turns the instructions into the steps the local sandbox applies before the agent starts
(horizon.eval.sandbox.local.imagebuild): WORKDIR, COPY/ADD of build-context files, ENV, ARG (its
value is in the environment of the RUN steps after it, as Docker gives it, not in the image's), RUN
(with the shell SHELL sets). The environment starts as the FROM image's (`base_env`; by default the
PATH Docker gives an image that sets none, as the official Debian images declare it), so that
`ENV PATH=/opt/venv/bin:$PATH` extends that PATH as a Docker build does. The FROM image is stood in for by the host's userland. Whatever the local sandbox
cannot reproduce is named, with its line (`Unsupported`): a second FROM (multi-stage), COPY --from,
ADD of a URL, a USER other than root, RUN --mount and other BuildKit flags, ONBUILD.
"""

from __future__ import annotations

import io
import json
import posixpath
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

IGNORED = set("COMMENT LABEL MAINTAINER EXPOSE CMD ENTRYPOINT HEALTHCHECK STOPSIGNAL VOLUME".split())
# Docker's default PATH: the one its builder and daemon give an image that declares none (and the
# official Debian images' `ENV PATH`)
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BASE_ENV = {"PATH": DEFAULT_PATH}
ROOT_USERS = {"root", "0", "root:root", "0:0"}
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


class Unsupported(ValueError):
    """A Dockerfile step the local sandbox cannot reproduce; the message names the file and line."""


@dataclass(frozen=True)
class Step:
    kind: str  # WORKDIR | COPY | ADD | ENV | ARG | RUN
    line: int  # 1-based, as an editor counts
    args: tuple = ()  # WORKDIR (path,); COPY (sources..., dest); ENV/ARG ((key, value), ...); RUN argv
    text: str = ""  # the instruction as written (for messages)


@dataclass
class Plan:
    """What the local sandbox replays. `workdir` is the last WORKDIR (None: the Dockerfile sets none)."""

    file: str
    base: str
    steps: list[Step] = field(default_factory=list)
    workdir: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    unsupported: list[str] = field(default_factory=list)

    @property
    def runs(self) -> bool:
        return any(s.kind == "RUN" for s in self.steps)


def expand(text: str, values: dict[str, str]) -> str:
    """Docker's variable expansion (a backslash keeps a `$` literal)."""

    def one(m: re.Match) -> str:
        name = m.group(1) or m.group(4)
        value = values.get(name)
        if m.group(2) in (":-", "-"):
            return value if value else m.group(3)
        if m.group(2) in (":+", "+"):
            return m.group(3) if value else ""
        return value or ""

    parts = re.split(r"(\\\$)", text)
    return "".join("$" if p == "\\$" else _VAR.sub(one, p) for p in parts)


def _parser(path: Path, build_args: dict | None):
    from dockerfile_parse import DockerfileParser

    return DockerfileParser(
        fileobj=io.BytesIO(path.read_bytes()), build_args=build_args or {}, env_replace=False
    )


def _words(value: str) -> list[str]:
    """An instruction's arguments: the JSON form, or shell-like words."""
    v = value.strip()
    if v.startswith("["):
        try:
            out = json.loads(v)
            if isinstance(out, list) and all(isinstance(x, str) for x in out):
                return out
        except ValueError:
            pass
    return shlex.split(v, posix=True)


def _flags(words: list[str]) -> tuple[dict[str, str], list[str]]:
    flags = {}
    while words and words[0].startswith("--"):
        key, _, val = words.pop(0)[2:].partition("=")
        flags[key] = val
    return flags, words


def last_workdir(path: Path, build_args: dict | None = None) -> str | None:
    """The WORKDIR the final image has (absolute), or None when the Dockerfile sets none."""
    return plan(path, build_args).workdir


def plan(path: str | Path, build_args: dict | None = None, base_env: dict | None = None) -> Plan:
    """The Dockerfile's steps for the local sandbox; what it cannot reproduce goes to `unsupported`.
    `base_env`: the FROM image's environment (default BASE_ENV: Docker's default PATH)."""
    path = Path(path)
    p = _parser(path, build_args)
    out = Plan(file=path.name, base=p.baseimage or "")
    env: dict[str, str] = dict(BASE_ENV if base_env is None else base_env)
    workdir, shell, froms = None, ["/bin/sh", "-c"], 0
    for ins, ctx in zip(p.structure, p.context_structure):
        kind, line, raw = ins["instruction"], ins["startline"] + 1, ins["value"]
        where = f"{path.name}: line {line}: {kind}"
        values = {**(build_args or {}), **ctx.args, **env}
        if kind == "FROM":
            froms += 1
            if froms > 1:
                out.unsupported.append(f"{where}: a multi-stage build (a second FROM)")
            continue
        if kind in IGNORED:
            continue
        if kind == "ARG":  # after FROM: in the environment of the RUN steps that follow (Docker's scope)
            declared = {w.split("=", 1)[0] for w in _words(raw) if "=" in w}  # those with a default
            given = {**(build_args or {})}
            new = {k: v for k, v in ctx.line_args.items() if froms and (k in declared or k in given)}
            if new:
                out.steps.append(Step("ARG", line, tuple(new.items()), raw))
            continue
        if kind == "ENV":
            new = {k: expand(v, values) for k, v in ctx.line_envs.items()}
            env.update(new)
            out.steps.append(Step("ENV", line, tuple(new.items()), raw))
        elif kind == "WORKDIR":
            d = expand(raw.strip().strip('"'), values)
            workdir = d if d.startswith("/") else f"{(workdir or '/').rstrip('/')}/{d}"
            out.steps.append(Step("WORKDIR", line, (workdir,), raw))
        elif kind in ("COPY", "ADD"):
            out.steps.append(_copy(kind, line, raw, values, where, out.unsupported, workdir))
        elif kind == "RUN":
            words = raw.strip()
            if words.startswith("--"):
                out.unsupported.append(f"{where}: BuildKit flags ({words.split()[0]}) are not reproduced")
                continue
            argv = _words(raw) if raw.strip().startswith("[") else [*shell, raw]
            out.steps.append(Step("RUN", line, tuple(argv), raw))
        elif kind == "SHELL":
            shell = _words(raw)
        elif kind == "USER":
            if expand(raw.strip(), values) not in ROOT_USERS:
                out.unsupported.append(f"{where}: {raw.strip()} (the local sandbox has only root)")
        else:  # ONBUILD and anything newer
            out.unsupported.append(f"{where}: not reproduced by the local sandbox")
    out.workdir, out.env = workdir, env
    return out


def _copy(kind, line, raw, values, where, unsupported, workdir) -> Step:
    flags, words = _flags(_words(raw))
    words = [expand(w, values) for w in words]
    if "from" in flags:
        unsupported.append(f"{where}: --from={flags['from']} (a multi-stage build)")
    owner = flags.get("chown")
    if owner is not None and expand(owner, values) not in ROOT_USERS:
        unsupported.append(f"{where}: --chown={owner} (the local sandbox has only root)")
    for w in words[:-1]:
        if re.match(r"^[a-z][a-z0-9+.-]*://", w) or w.startswith("git@"):
            unsupported.append(f"{where}: {w} (fetching needs the network)")
    if len(words) < 2:
        unsupported.append(f"{where}: needs a source and a destination")
        return Step(kind, line, (), raw)
    dest = words[-1]
    is_dir = dest.endswith("/") or dest in (".", "..")
    dest = posixpath.normpath(posixpath.join(workdir or "/", dest)) if not dest.startswith("/") else dest
    dest = dest.rstrip("/") + "/" if is_dir else dest
    return Step(kind, line, (*words[:-1], dest), raw)


def map_bases(path: Path, mapping: dict[str, str], build_args: dict | None = None) -> str | None:
    """The Dockerfile's text with each FROM image named in `mapping` replaced by its local stand-in
    (an image that cannot be pulled here: docs/evaluation/tasks.md); None when no FROM is mapped."""
    lines = path.read_text().splitlines(keepends=True)
    changed, seen = False, {}
    for ins, ctx in zip((p := _parser(path, build_args)).structure, p.context_structure):
        if ins["instruction"] != "FROM":
            seen = ctx.args  # the ARGs before a FROM are what its image name may use
            continue
        words = ins["value"].split()
        flags = [w for w in words if w.startswith("--")]
        rest = [w for w in words if not w.startswith("--")]
        image = expand(rest[0], {**seen, **(build_args or {})}) if rest else ""
        if image not in mapping:
            continue
        lines[ins["startline"]] = " ".join(["FROM", *flags, mapping[image], *rest[1:]]) + "\n"
        for i in range(ins["startline"] + 1, ins["endline"] + 1):
            lines[i] = ""
        changed = True
    return "".join(lines) if changed else None
