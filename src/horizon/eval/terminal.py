"""A tmux terminal inside a sandbox: keystrokes in, new screen content out.

Keystrokes are typed as the model wrote them: text is sent literally, a newline presses Enter, and
a keystrokes string that is exactly a tmux key name (C-c, C-d, Escape, Up, ...) presses that key.
After the keys, the caller waits min(duration, 60) s. The observation is the terminal content that
is new since the last observation (from tmux's history, so output that scrolled by is not lost),
capped at `cap` bytes: the first and last cap/2 bytes kept and a marker between.
"""

from __future__ import annotations

import re
import time

from horizon.eval.sandbox import Sandbox, SandboxError

SESSION = "agent"
MAX_WAIT = 60.0
KEY_NAMES = re.compile(
    r"^(C-[a-z\\\]\[@^_]|M-[a-z]|Escape|Enter|Tab|BSpace|Up|Down|Left|Right|Home|End|PageUp|PageDown|PPage|NPage|"
    r"F[1-9]|F1[0-2]|Space|DC|IC)$"
)


class TerminalLost(RuntimeError):
    """The tmux session is gone (the agent killed it, or the sandbox died)."""


def cap_output(text: str, cap: int = 10_000) -> str:
    data = text.encode("utf-8", errors="replace")
    if len(data) <= cap:
        return text
    half = cap // 2
    head = data[:half].decode("utf-8", errors="ignore")
    tail = data[-half:].decode("utf-8", errors="ignore")
    return f"{head}\n[... output limited to {cap} bytes; {len(data) - 2 * half} interior bytes omitted ...]\n{tail}"


class Terminal:
    def __init__(self, sandbox: Sandbox, width: int = 160, height: int = 40, history: int = 5000):
        self.sb = sandbox
        self.width, self.height, self.history = width, height, history
        self._seen = ""

    def _tmux(self, *args: str, timeout: float = 20) -> str:
        r = self.sb.exec(["tmux", *args], timeout=timeout, cwd="/app")
        if r.rc != 0:
            raise TerminalLost(f"tmux {args[0]} failed: {(r.stderr or r.stdout).strip()[-300:]}")
        return r.stdout

    def start(self) -> str:
        # the history limit must be set before the pane exists (it applies to new panes only)
        r = self.sb.exec(
            ["tmux", "start-server", ";", "set-option", "-g", "history-limit", str(self.history), ";",
             "new-session", "-d", "-s", SESSION, "-x", str(self.width), "-y", str(self.height),
             "-c", "/app", "bash", "--login"], timeout=30)  # fmt: skip
        if r.rc != 0:
            raise SandboxError(f"tmux did not start: {(r.stderr or r.stdout).strip()[-300:]}")
        self._wait_for_prompt()
        screen = self.screen()
        self._checkpoint()
        return screen

    def _checkpoint(self) -> None:
        """Forget the scrollback seen so far; remember the visible screen (the start of what comes next)."""
        self._tmux("clear-history", "-t", SESSION)
        self._seen = self._history()

    def _wait_for_prompt(self, timeout: float = 5.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.screen().strip():
                return
            time.sleep(0.02)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", SESSION).rstrip("\n") + "\n"

    def _history(self) -> str:
        return self._tmux("capture-pane", "-p", "-J", "-S", "-", "-t", SESSION).rstrip()

    def send(self, keystrokes: str) -> None:
        if KEY_NAMES.match(keystrokes.strip()) and "\n" not in keystrokes:
            self._tmux("send-keys", "-t", SESSION, keystrokes.strip())
            return
        parts = keystrokes.split("\n")
        for i, part in enumerate(parts):
            if part:
                self._tmux("send-keys", "-t", SESSION, "-l", part)
            if i < len(parts) - 1:
                self._tmux("send-keys", "-t", SESSION, "Enter")

    def run(self, keystrokes: str, duration: float, deadline: float | None = None) -> None:
        self.send(keystrokes)
        wait = min(max(duration, 0.0), MAX_WAIT)
        if deadline is not None:
            wait = max(0.0, min(wait, deadline - time.monotonic()))
        time.sleep(wait)

    def new_output(self, cap: int = 10_000) -> str:
        """What appeared since the last call (falls back to the screen when history was cut)."""
        now = self._history()
        base = self._seen[: self._seen.rfind("\n") + 1]  # the screen we saw, up to its last line (the prompt)
        if now.startswith(self._seen):  # the prompt line we saw may have been typed on since
            new = now[len(base) :]
        else:  # the screen we saw scrolled out of tmux's history: more output than it keeps
            new = f"[... earlier output dropped: more than {self.history} lines ...]\n" + now[-(cap * 2) :]
        self._checkpoint()
        if not new.strip():
            new = self.screen().rstrip("\n").split("\n")[-1]
        return cap_output(new.rstrip("\n"), cap)

    def alive(self) -> bool:
        try:
            return self.sb.exec(["tmux", "has-session", "-t", SESSION], timeout=10).rc == 0
        except SandboxError:
            return False
