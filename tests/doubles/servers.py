"""Starting the SCRIPTED servers (FAKE models: no model behind them) in their own processes.

`scripted_process` runs one of this folder's servers (scripted_judge.py, scripted_synth.py) on a free
port once it accepts connections; `scripted_answers` is the FAKE `vllm serve`'s script (fake_vllm.py,
started by the code under test as its vLLM command: FAKE_VLLM) for the two Harbor-run tasks.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time

from tests.doubles import DIR

FAKE_VLLM = DIR / "fake_vllm.py"


def scripted_answers() -> dict:
    """FAKE model (tests/doubles/fake_vllm.py's script): per task, the answers in order. greet: an
    unparseable answer, the fix, task_complete twice (success); count-words: a wrong count (failure)."""
    from horizon.terminus import Command, render_response

    def ans(cmd=None, done=False):
        return render_response("a", "p", [Command(cmd, 0.2)] if cmd else [], done, reasoning="r")

    done = [ans(done=True), ans(done=True)]
    return {
        "tasks": [
            {"match": "the word hello to /app/greeting.txt",
             "answers": ["<think>\nr\n</think>\n\nI will write it {not json", ans("echo hello > /app/greeting.txt\n"), *done]},
            {"match": "number of words in /app/poem.txt", "answers": [ans("wc -l < /app/poem.txt > /app/words.txt\n"), *done]},
        ]
    }  # fmt: skip


@contextlib.contextmanager
def scripted_process(script: str, *args, log=None, what: str = "scripted server"):
    """A SCRIPTED OpenAI-compatible server (tests/doubles/<script>) in its own process, once it
    accepts connections; yields (base URL, process) and kills it after."""
    from horizon.eval.models.backends import free_port

    port = free_port()
    cmd = [sys.executable, str(DIR / script), "--port", str(port), *map(str, args)]
    proc = subprocess.Popen([*cmd, *(["--log", str(log)] if log else [])])
    deadline = time.time() + 20
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            break
        if time.time() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError(f"the {what} did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def scripted_synth_server(*args, log=None):
    """The SCRIPTED synthesis server (tests/doubles/scripted_synth.py: a FAKE author, reviewer and teacher);
    yields its base URL."""
    with scripted_process("scripted_synth.py", *args, log=log, what="scripted synthesis server") as (url, _):
        yield url
