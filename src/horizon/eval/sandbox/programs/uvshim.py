#!/usr/bin/env python3
"""`uv` and `uvx` inside a sandbox: the real uv (the binary of PyPI's `uv`), offline, with two adjustments.

Installed into the graders' toolchain as bin/uv and bin/uvx (this file, run by the sandbox's own
python3); the real binary is libexec/uv, the wheelhouse wheels/ (horizon.eval.sandbox.wheelhouse).
Without the network (the default: `HORIZON_NETWORK` unset) uv runs with UV_OFFLINE, the wheelhouse as
its only package source and no Python downloads. What a test script asks for that cannot be had
offline is adjusted, and each adjustment is printed on stderr, so the grader's output says it:
- a requirement on a package the wheelhouse holds (`-w pytest==8.4.1`, `uv add pytest==8.4.1`,
  `uvx pytest@8.4.1`) is pinned to the version it holds;
- a Python that is not in the sandbox (`-p 3.13`) becomes the sandbox's python3;
- a script with inline metadata (`uv run parser.py`, PEP 723) runs as `uv run --no-project --with DEP...
  python parser.py`, its dependencies pinned as above (uv applies no override to a script's own list);
- requirements files (`--with-requirements`, `uv pip install -r`) get the same pins through UV_OVERRIDE.
Everything else goes to uv unchanged, which names what it cannot find.
Only the standard library: this runs on whatever Python the container has.
"""

import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROVIDED_FILE = os.path.join(ROOT, "wheels", "provided.json")
# options of uv's commands that take a value (the value is never a requirement or a command)
VALUE_OPTS = set(
    (
        "-p --python -w --with --with-editable --with-requirements --from --project --directory -i"
        " --index-url --extra-index-url --index --default-index -f --find-links -r --requirements"
        " --requirement -c --constraints --constraint --overrides --override --group --extra --package"
        " --cache-dir --config-file --env-file --script -e --editable -o --output-file --prompt"
        " --link-mode --resolution --prerelease --exclude-newer --python-platform --index-strategy"
        " --keyring-provider --color -b --build-constraints -C --config-setting --name --target --prefix"
        " --dev-group --optional --branch --tag --rev --bounds --upgrade-package -P --reinstall-package"
        " --torch-backend --allow-insecure-host"
    ).split()
)
REQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(@\s*[0-9][^\s;]*|[<>=!~][^;]*)?(;.*)?$")


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def provided():
    try:
        with open(PROVIDED_FILE) as fh:
            return json.load(fh)
    except OSError:
        return {}


def pin(spec, held, notes):
    """A requirement on a package the wheelhouse holds, pinned to the version it holds."""
    m = REQ.match(spec.strip())
    if not m or _norm(m.group(1)) not in held or not m.group(3):
        return spec
    new = f"{m.group(1)}{m.group(2) or ''}=={held[_norm(m.group(1))]}{m.group(4) or ''}"
    if new != spec:
        notes.append(f"{spec} -> {new} (the offline wheelhouse)")
    return new


def tool_command(token, held, notes):
    """uvx's command `name@version`: the version the wheelhouse holds."""
    name, at, version = token.partition("@")
    if at and _norm(name) in held and version != held[_norm(name)]:
        notes.append(f"{token} -> {name}@{held[_norm(name)]} (the offline wheelhouse)")
        return f"{name}@{held[_norm(name)]}"
    return token


def python_for(request, uv, notes):
    """The interpreter to use for `-p request`: itself when uv finds it here, else the sandbox's python3."""
    if subprocess.run([uv, "python", "find", request], capture_output=True).returncode == 0:
        return request
    fallback = shutil.which("python3") or sys.executable
    notes.append(f"Python {request} is not in this sandbox: {fallback} instead (no downloads offline)")
    return fallback


def script_deps(path):
    """The dependencies of a PEP 723 script block, or None when the file has none."""
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError:
        return None
    m = re.search(r"^# /// script\s*$(.*?)^# ///\s*$", text, re.M | re.S)
    if not m:
        return None
    body = "\n".join(line[2:] if line.startswith("# ") else line[1:] for line in m.group(1).splitlines())
    deps = re.search(r"dependencies\s*=\s*\[(.*?)\]", body, re.S)
    return re.findall(r"[\"']([^\"']+)[\"']", deps.group(1)) if deps else []


def run_script(out, rest, held, notes):
    """`uv run [options] script.py args` with inline metadata, as `uv run --no-project --with ... python`."""
    deps = script_deps(rest[0]) if rest and rest[0].endswith(".py") else None
    if deps is None:
        return out + rest
    withs = [w for d in deps for w in ("--with", pin(d, held, notes))]
    notes.append(f"{rest[0]}: its inline dependencies as --with (the offline wheelhouse)")
    return [*out, "--no-project", *withs, "python", *rest]


def rewrite(args, held, uv, notes):
    """uv's arguments with the adjustments above; nothing after a `run` command's name is touched."""
    out, positional, i = [], [], 0
    while i < len(args):
        a = args[i]
        name, eq, inline = a.partition("=")
        takes = a in VALUE_OPTS or (eq and name in VALUE_OPTS and a.startswith("--"))
        if takes:
            value = inline if eq else (args[i + 1] if i + 1 < len(args) else "")
            opt = name if eq else a
            if opt in ("-p", "--python"):
                value = python_for(value, uv, notes)
            elif opt in ("-w", "--with", "--from"):
                value = ",".join(pin(v, held, notes) for v in value.split(","))
            out += [f"{opt}={value}"] if eq else [opt, value]
            i += 1 if eq else 2
            continue
        if a.startswith("-") or a == "--":
            out.append(a)
            i += 1
            if a == "--":
                out += args[i:]
                break
            continue
        positional.append(a)
        head = positional[:2]
        if head[:1] == ["run"] and len(positional) == 2:
            return run_script(out, args[i:], held, notes)  # the command and its own arguments, untouched
        if head == ["tool", "run"] and len(positional) == 3:
            out += [tool_command(a, held, notes), *args[i + 1 :]]
            break
        words = 1 if head[:1] == ["add"] else 2 if head in (["pip", "install"], ["tool", "install"]) else 0
        out.append(pin(a, held, notes) if words and len(positional) > words else a)
        i += 1
    return out


def environment(network):
    env = dict(os.environ)
    env.setdefault("UV_PYTHON_PREFERENCE", "only-system")
    env.setdefault("UV_LINK_MODE", "copy")
    env.setdefault("UV_NO_PROGRESS", "1")
    env["UV_FIND_LINKS"] = os.path.join(ROOT, "wheels")
    if not network:
        env.update(
            UV_OFFLINE="1",
            UV_NO_INDEX="1",
            UV_PYTHON_DOWNLOADS="never",
            UV_OVERRIDE=os.path.join(ROOT, "wheels", "overrides.txt"),
        )
    return env


def main(argv):
    uv = os.path.join(ROOT, "libexec", "uv")
    args = argv[1:]
    if os.path.basename(argv[0]) == "uvx":
        args = ["tool", "run", *args]
    network = os.environ.get("HORIZON_NETWORK") == "1"
    notes = []
    if not network:
        args = rewrite(args, provided(), uv, notes)
    for n in notes:
        sys.stderr.write(f"horizon uv: {n}\n")
    sys.stderr.flush()
    os.execve(uv, [uv, *args], environment(network))


if __name__ == "__main__":
    main(sys.argv)
