"""A tmux terminal inside a sandbox, driven the way Terminus-2 drives its tmux session.

- Start: `tmux new-session -d -s agent -x 160 -y 40 bash --login` (TERM=xterm-256color). The
  history limit is left at tmux's default (2,000 lines): both reference sessions set theirs
  (10,000,000 in harbor, 50,000 in terminal-bench) only after the pane exists, and tmux applies the
  option to new panes only, so their agent panes keep 2,000 lines too (tests/conformance checks
  ours and harbor's on the same tmux).
- Keys: the model's keystrokes string is one tmux key argument. tmux presses a key when the string
  is exactly a key name (C-c, Enter, Escape, ...) and types it literally otherwise; a newline in it
  presses Enter. harbor style: `send-keys -t agent -- KEYS`, and a string too long for one tmux
  command (16,000 bytes once shell-quoted, as harbor measures) is pasted through a tmux buffer
  instead (a paste turns each newline into Enter too). terminal-bench style: `send-keys -t agent
  KEYS`, no `--`, no size handling, failures ignored (a string starting with `-` is lost there).
- Wait: min(duration, 60) s counted from the start of sending (negative: no wait), cut at the deadline.
  With `settle` (eval.capture: idle, a deviation from Terminus-2's timing, for reproducible runs) the
  wait goes on, at most `settle` s more, until the pane is idle: every process of its terminal's
  foreground group asleep (the shell waiting for keys, or a command waiting for input or a timer:
  nothing computing, reading a disk or about to print; every typed key read) and the whole history
  unchanged between two looks IDLE_POLL s apart. A capture then no longer depends on how fast a
  loaded machine ran the command; two processes writing at once still interleave as the scheduler
  lets them. The history of the look that found the pane idle is the one the output is
  taken from (no second capture a few ms later: one tmux command fewer an episode).
- Output (`incremental`): as theirs. The first call shows the visible screen. Later calls diff the
  whole history (`capture-pane -p -S -`, lines wrapped at the pane width) against the previous one:
  when the previous text (stripped) is still found, the new output starts at the offset of its last
  newline *within the previous text* (their arithmetic, kept: usually the old prompt line); when
  it is not found (more than 2,000 lines scrolled by) or nothing new shows, the visible screen.
  The two forms are worded by the template (`terminal_screen`, `terminal_new`).
- Truncation (`limit_output`): over `max_bytes` UTF-8 bytes, the first and last max_bytes/2 bytes
  are kept (a character split at the cut is dropped and counted as omitted) around a marker line.
"""

from __future__ import annotations

import base64
import shlex
import time
import uuid

from horizon.eval.agent.prompts import fill
from horizon.eval.sandbox import Sandbox, SandboxError

SESSION = "agent"
MAX_WAIT = 60.0
MAX_COMMAND_BYTES = 16_000  # harbor's bound on one tmux send-keys command
TOO_LONG = "command too long"  # what tmux answers when a command exceeds its message size
PASTE_CHUNK = 32_768  # base64 characters per staging command (harbor's size)
SCREEN_FORM = "{screen}"
NEW_FORM = "{output}"
MARKER = "\n[... {omitted} of {limit} ...]\n"
IDLE_POLL = 0.05  # s between two looks at the pane when waiting for it to be idle
# one look at the pane: the stat line of every process of the sandbox (read by the shell's builtins),
# a line "-", the whole history. Two programs per look (the shell and one tmux client), which a wait
# runs every IDLE_POLL s: the pane's process id is asked once (PANE), not at every look. A sandbox
# that reads its processes itself (Sandbox.foreground) is asked instead, and the shell is not started.
LOOK = (
    '{ for f in /proc/[0-9]*/stat; do read -r l < "$f" && printf "%s\\n" "$l"; done; } 2>/dev/null; '
    'echo -; tmux capture-pane -p -S - -t "$0"'
)
PANE = ("display-message", "-p", "-t", SESSION, "#{pane_pid}")
# a look this long may have reached a sandbox's output cap (exec's max_bytes, 1 MiB): its history is
# not reused as the output, which is then captured on its own
REUSE_BELOW = 3 << 18


class TerminalLost(RuntimeError):
    """The tmux session is gone (the agent killed it, or the sandbox died)."""


class TerminalTimeout(RuntimeError):
    """Keys were sent but the command did not finish in time (blocking sends only)."""


def limit_output(text: str, max_bytes: int = 10_000, marker: str = MARKER) -> str:
    """Head and tail of `text` around the marker when it is longer than max_bytes UTF-8 bytes."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    half = max_bytes // 2
    head = data[:half].decode("utf-8", errors="ignore")
    tail = data[-half:].decode("utf-8", errors="ignore")
    omitted = len(data) - len(head.encode("utf-8")) - len(tail.encode("utf-8"))
    return head + fill(marker, limit=max_bytes, omitted=omitted) + tail


def new_content(previous: str, current: str) -> str | None:
    """What the terminal shows beyond `previous` (see the module docstring), or None."""
    prev = previous.strip()
    if prev not in current:
        return None
    start = current.index(prev)
    if "\n" in prev:
        start = prev.rfind("\n")  # an offset into the previous text, applied to the current one
    return current[start:]


class Terminal:
    def __init__(
        self,
        sandbox: Sandbox,
        screen_form: str = SCREEN_FORM,
        new_form: str = NEW_FORM,
        style: str = "harbor",
        width: int = 160,
        height: int = 40,
        workdir: str | None = None,
        settle: float | None = None,
    ):
        self.sb = sandbox
        self.settle = settle  # None: Terminus-2's timing; else the bound on the wait for an idle pane
        self.screen_form, self.new_form, self.style = screen_form, new_form, style
        self.width, self.height = width, height
        self.workdir = workdir or getattr(sandbox, "workdir", None) or "/app"  # the task's working directory
        self._previous: str | None = None
        self._pane: str | None = None  # the pane's process id (the same for the pane's life)
        self._settled: str | None = None  # the history the last wait saw idle, until keys are sent
        self._stat_bytes = 0  # the process lines of the last look

    def _tmux(self, *args: str, timeout: float = 20) -> str:
        r = self.sb.exec(["tmux", *args], timeout=timeout, cwd=self.workdir)
        if r.rc != 0:
            raise TerminalLost(f"tmux {args[0]} failed: {(r.stderr or r.stdout).strip()[-300:]}")
        return r.stdout

    def start(self) -> str:
        """Start the session; the terminal state of the first prompt (the visible screen)."""
        r = self.sb.exec(
            [
                "tmux",
                "new-session",
                "-d",
                "-s",
                SESSION,
                "-x",
                str(self.width),
                "-y",
                str(self.height),
                "-c",
                self.workdir,
                "bash",
                "--login",
            ],
            timeout=30,
            cwd=self.workdir,
            env={"TERM": "xterm-256color", "SHELL": "/bin/bash"},
        )
        if r.rc != 0:
            raise SandboxError(f"tmux did not start: {(r.stderr or r.stdout).strip()[-300:]}")
        self._wait_for_prompt()
        if self.settle is not None:
            self.wait_idle()
        return self.incremental()

    def _wait_for_prompt(self, timeout: float = 5.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.screen().strip():
                return
            time.sleep(0.02)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", SESSION)

    def history(self) -> str:
        return self._tmux("capture-pane", "-p", "-S", "-", "-t", SESSION)

    def incremental(self) -> str:
        # right after a wait that saw the pane idle, its last look is the history: no second capture
        current, self._settled = (self._settled if self._settled is not None else self.history()), None
        if self._previous is None:
            self._previous = current
            return fill(self.screen_form, screen=self.screen())
        new = new_content(self._previous, current)
        self._previous = current
        if new is not None and new.strip():
            return fill(self.new_form, output=new)
        return fill(self.screen_form, screen=self.screen())

    # -- keys -------------------------------------------------------------------------------------

    def send(self, keys: str) -> None:
        self._settled = None
        if self.style == "tb1":
            self.sb.exec(["tmux", "send-keys", "-t", SESSION, keys], timeout=20, cwd=self.workdir)
            return
        prefix = f"tmux send-keys -t {shlex.quote(SESSION)} --"
        if len(shlex.quote(keys).encode("utf-8")) > MAX_COMMAND_BYTES - len(prefix.encode("utf-8")) - 1:
            self.paste(keys)
            return
        r = self.sb.exec(["tmux", "send-keys", "-t", SESSION, "--", keys], timeout=20, cwd=self.workdir)
        if r.rc != 0 and TOO_LONG in (r.stderr or ""):
            self.paste(keys)  # this tmux has a smaller limit: a long string is never a key name
        elif r.rc != 0:
            raise TerminalLost(f"tmux send-keys failed: {(r.stderr or r.stdout).strip()[-300:]}")

    def paste(self, text: str) -> None:
        """Type `text` through a tmux paste buffer (newlines become Enter). The text is staged in a
        file in base64 chunks (as harbor does; no exec stdin, which not every sandbox offers)."""
        self._settled = None
        if not text:
            return
        token = uuid.uuid4().hex
        path, buf = f"/tmp/.horizon-paste-{token}", f"horizon-paste-{token}"
        data = base64.b64encode(text.encode("utf-8")).decode("ascii")
        try:
            for at in range(0, len(data), PASTE_CHUNK):
                redirect = ">>" if at else ">"
                r = self.sb.exec(
                    [
                        "sh",
                        "-c",
                        f'printf %s "$1" | base64 -d {redirect} "$0"',
                        path,
                        data[at : at + PASTE_CHUNK],
                    ],
                    timeout=60,
                    cwd=self.workdir,
                )
                if r.rc != 0:
                    raise TerminalLost(f"staging a paste failed: {(r.stderr or r.stdout).strip()[-300:]}")
            self._tmux("load-buffer", "-b", buf, path)
            self._tmux("paste-buffer", "-d", "-b", buf, "-t", SESSION)
        finally:
            self.sb.exec(["rm", "-f", path], timeout=20, cwd=self.workdir)

    def run(self, keys: str, duration: float, deadline: float | None = None) -> None:
        """Send the keys, then wait what is left of min(duration, 60) s (never past the deadline)."""
        start = time.monotonic()
        self.send(keys)
        wait = min(duration, MAX_WAIT) - (time.monotonic() - start)
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
        if wait > 0:
            time.sleep(wait)
        if self.settle is not None:
            self.wait_idle(deadline)

    def wait_idle(self, deadline: float | None = None) -> bool:
        """Wait until the pane is idle (module docstring), at most `settle` s and never past the
        deadline; whether it became idle."""
        end = time.monotonic() + (self.settle or 0.0)
        if deadline is not None:
            end = min(end, deadline)
        seen = None
        while True:
            looked = self.look()
            if looked is None:  # tmux is gone: the capture that follows says so
                return False
            idle, text = looked
            if idle and text == seen:
                self._settled = text if len(text.encode()) + self._stat_bytes < REUSE_BELOW else None
                return True
            seen = text if idle else None
            if time.monotonic() + IDLE_POLL > end:
                return False
            time.sleep(IDLE_POLL)

    def look(self) -> tuple[bool, str] | None:
        """(is every process of the pane's foreground group asleep, the history), or None when the pane
        cannot be read. A sandbox that reads its processes itself (`Sandbox.foreground`: the local
        one's pid 1) is asked first and the history captured after, one command; else both are read
        in one shell command (LOOK), which also finds the pane's process the first time."""
        if self._pane is not None and self._pane.isdigit():
            seen = self.sb.foreground(int(self._pane))
            if seen is not None and seen[0]:
                self._stat_bytes = 0
                try:
                    return seen[1], self.history()
                except (TerminalLost, SandboxError):
                    return None
        return self._look_in_one_command()

    def _look_in_one_command(self) -> tuple[bool, str] | None:
        try:
            r = self.sb.exec(["sh", "-c", LOOK, SESSION], timeout=20, cwd=self.workdir)
        except SandboxError:
            return None
        head, sep, text = r.stdout.partition("\n-\n")
        self._stat_bytes = len(head.encode())
        if r.rc != 0 or not sep:
            return None
        procs = {}  # pid: (state, process group, the terminal's foreground group)
        for line in head.splitlines():
            pid, _, rest = line.partition(" (")
            f = rest.rpartition(")")[2].split()
            if len(f) > 5:
                procs[pid] = (f[0], f[2], f[5])
        if self._pane not in procs:  # the first look, or the agent replaced the pane's process
            try:
                self._pane = self._tmux(*PANE).strip()
            except (TerminalLost, SandboxError):
                return None
            if self._pane not in procs:
                return None
        foreground = procs[self._pane][2]
        group = [state for state, pgrp, _ in procs.values() if pgrp == foreground]
        return bool(group) and all(state == "S" for state in group), text

    def alive(self) -> bool:
        try:
            return self.sb.exec(["tmux", "has-session", "-t", SESSION], timeout=10, cwd=self.workdir).rc == 0
        except SandboxError:
            return False
