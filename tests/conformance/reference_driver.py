"""Drive the published Terminus-2 (harbor 0.26.0, terminal-bench 0.2.18) on the conformance suite's inputs.

A script for the reference environment's interpreter (`.venv-harbor/bin/python`, Python >= 3.12,
`make refenv`); it never runs inside horizon's own environment and imports only the standard library,
the two reference packages and the product's own programs for that interpreter (argv[1]: the directory
of horizon.eval.reference.programs), loaded by file path: their agent loop on scripted edges
(terminus_loop.py) and the template export (export_template.py). It reads a JSON list of requests on
stdin and writes a JSON list of results on stdout:

  {"op": "parse", "variant": V, "texts": [...]}      their JSON parser on each text
  {"op": "limit", "variant": V, "texts": [...], "max_bytes": N}    their output truncation
  {"op": "incremental", "variant": V, "captures": [[history, screen], ...]}  their tmux diff
  {"op": "incremental_many", "variant": V, "cases": [captures, ...]}   the same for several cases
  {"op": "keys", "variant": V, "payloads": [...]}    the tmux commands their session runs per payload
  {"op": "loop", "variant": V, ...scenario...}       their agent loop on a scripted model and terminal
  {"op": "tmux_real", "variant": V, ...}              their tmux session on this machine's tmux
  {"op": "export", "variant": V}                      their prompt turns as a horizon template (the product's)

V is "harbor" or "tb1".
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import json
import os
import shlex
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # the suite's modules live here
os.environ.setdefault("OPENAI_API_KEY", "unused")


def load_program(path: Path):
    """One of the product's programs for this interpreter, loaded by file path."""
    spec = importlib.util.spec_from_file_location(f"horizon_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


# the product's export (export_template.py) and the loop runner it shares (terminus_loop.py)
exporter = load_program(Path(sys.argv[1]) / "export_template.py")
loop = exporter.loop


def load_parser(variant: str):
    path = loop.site_file(variant)
    name = f"_terminus_parser_{variant}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod.TerminusJSONPlainParser()


# ---------------------------------------------------------------------------------------------
# parser, truncation, tmux


def op_parse(req: dict) -> list[dict]:
    parser = load_parser(req["variant"])
    out = []
    for text in req["texts"]:
        r = parser.parse_response(text)
        out.append(
            {"commands": [[c.keystrokes, c.duration] for c in r.commands], "complete": r.is_task_complete,
             "truthy": bool(r.is_task_complete), "error": r.error, "warning": r.warning}
        )  # fmt: skip
    return out


def op_limit(req: dict) -> list[str]:
    limit = loop.agent_class(req["variant"])._limit_output_length
    return [limit(None, t, req.get("max_bytes", 10000)) for t in req["texts"]]


def wait_idle(run, name: str, limit: float = 30.0) -> None:
    """Until the pane is idle as horizon's `eval.capture: idle` reads it (every process of the terminal's
    foreground group asleep, the whole history unchanged between two looks 0.05 s apart), at most
    `limit` s: both sides are read at the same point, whatever the machine's load (the test's own
    wait, not part of their session)."""
    import time

    end, seen = time.monotonic() + limit, None
    while time.monotonic() < end:
        pane = run(["tmux", "display-message", "-p", "-t", name, "#{pane_pid}"]).stdout.decode().strip()
        text = run(["tmux", "capture-pane", "-p", "-S", "-", "-t", name]).stdout
        stats = {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                f = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            stats[pid] = (f[0], f[2], f[5])  # state, process group, the terminal's foreground group
        if pane in stats:
            group = [state for state, pgrp, _ in stats.values() if pgrp == stats[pane][2]]
            idle = bool(group) and all(state == "S" for state in group)
            if idle and text == seen:
                return
            seen = text if idle else None
        time.sleep(0.05)


def op_tmux_real(req: dict) -> dict:
    """Their session on this machine's tmux (a private server under req["tmux_tmpdir"]): start it,
    type each step's keys, wait, and collect the incremental outputs and the pane's history limit."""
    import subprocess
    import time

    env = {**os.environ, "TMUX_TMPDIR": req["tmux_tmpdir"], "HOME": req["tmux_tmpdir"]}  # as the test's side
    cwd = req["workdir"]

    def run(cmd):
        argv = cmd if isinstance(cmd, list) else ["bash", "-c", cmd]
        return subprocess.run(argv, cwd=cwd, env=env, capture_output=True)

    if req["variant"] == "harbor":
        from harbor.agents.terminus_2.tmux_session import TmuxSession
        from harbor.environments.base import ExecResult

        class Local:
            session_id = "local"

            async def exec(self, command, user=None, timeout_sec=None, **kw):
                p = run(command)
                return ExecResult(stdout=p.stdout.decode(errors="replace"), stderr=p.stderr.decode(errors="replace"),
                                  return_code=p.returncode)  # fmt: skip

        session = TmuxSession("terminus-2", Local(), Path(cwd) / "pane.log", None, None)

        async def noop():
            return None

        session._attempt_tmux_installation = noop
        asyncio.run(session.start())
        call = asyncio.run
    else:
        from terminal_bench.terminal.tmux_session import TmuxSession

        class Container:
            def exec_run(self, cmd, user=""):
                p = run(list(cmd))
                return type("R", (), {"exit_code": p.returncode, "output": p.stdout + p.stderr})()

        TmuxSession.logging_path = property(lambda self: Path(cwd) / "pane.log")  # not /logs on this machine
        session = TmuxSession.__new__(TmuxSession)
        session.container, session._session_name, session._user = Container(), "agent", ""
        session._commands_path, session._previous_buffer, session._disable_recording = None, None, True
        session._logger = __import__("logging").getLogger("tb")
        session.start()

        def call(x):
            return x

    name = "terminus-2" if req["variant"] == "harbor" else "agent"
    end = time.monotonic() + 20  # as a harness would get it: the shell has drawn its prompt
    while time.monotonic() < end and not run(["tmux", "capture-pane", "-p", "-t", name]).stdout.strip():
        time.sleep(0.05)
    outputs = [call(session.get_incremental_output())]
    for keys, wait in req["steps"]:
        call(session.send_keys(keys, block=False, min_timeout_sec=wait))
        wait_idle(run, name)
        outputs.append(call(session.get_incremental_output()))
    limit = run(["tmux", "display-message", "-p", "-t", name, "#{history_limit}"]).stdout.decode().strip()
    run(["tmux", "kill-server"])
    return {"outputs": outputs, "history_limit": limit}


def op_keys(req: dict) -> list[list]:
    """Per payload: the tmux operations their session runs, as [["argv", [...]] | ["paste", text]]."""
    out = []
    for payload in req["payloads"]:
        log: list = []
        session = loop.bare_session(req["variant"], log)
        if req["variant"] == "harbor":
            asyncio.run(session.send_keys(payload, block=False, min_timeout_sec=0.0))
        else:
            session.send_keys(payload, block=False, min_timeout_sec=0.0)
        out.append(_operations(log))
    return out


def _operations(log: list) -> list:
    """Shell command strings become argv lists; a staged paste becomes ["paste", payload]."""
    ops, chunks = [], []
    for cmd in log:
        if isinstance(cmd, list):
            ops.append(["argv", cmd])
        elif cmd.startswith("printf %s "):
            chunks.append(shlex.split(cmd)[2])
        elif cmd.startswith("tmux load-buffer"):
            ops.append(["paste", base64.b64decode("".join(chunks)).decode("utf-8")])
            chunks = []
        elif not cmd.startswith("rm -f "):
            ops.append(["argv", shlex.split(cmd)])
    return ops


def op_incremental_many(req: dict) -> list[list[str]]:
    return [loop.incremental({"variant": req["variant"], "captures": c}) for c in req["cases"]]


def op_loop(req: dict) -> dict:
    s = (loop.run_harbor if req["variant"] == "harbor" else loop.run_tb1)(req)
    return {"calls": s.calls, "keys": s.keys, "end": s.end}


OPS = {"tmux_real": op_tmux_real, "parse": op_parse, "limit": op_limit, "incremental": loop.incremental,
       "keys": op_keys, "incremental_many": op_incremental_many, "loop": op_loop,
       "export": exporter.op_export}  # fmt: skip


def main() -> None:
    import logging

    logging.disable(logging.CRITICAL)  # their loggers would write into our stdout protocol
    requests = json.load(sys.stdin)
    results = [OPS[r["op"]](r) for r in requests]
    sys.stdout.write(json.dumps(results))


if __name__ == "__main__":
    main()
