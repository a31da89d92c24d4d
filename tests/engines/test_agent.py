"""The agent loop in a real sandbox with a real tmux: semantics and faults a model can cause."""

import json
import os

import pytest

from horizon.eval.agent.loop import AgentConfig
from horizon.eval.agent.prompts import Template
from horizon.eval.attempt import LiveSandboxes, RunContext, run_attempt
from horizon.eval.tasks.benchmark import load_benchmark, load_harbor, load_tb1
from horizon.terminus import Command, render_response
from tests.doubles.backends import ScriptedBackend
from tests.engine_fixtures import sandboxes_left
from tests.helpers import FIXTURES, REPO

pytestmark = pytest.mark.engine
OURS = {os.getpid()}  # the sandboxes these tests start (the machine may run others)
TEMPLATE = Template.load(REPO / "demo" / "prompt.yaml")
HELLO = load_harbor(FIXTURES / "harbor-tasks" / "hello")


def answer(*cmds, done=False, duration=0.1, reasoning="r", analysis="a"):
    return render_response(analysis, "p", [Command(c, duration) for c in cmds], done, reasoning=reasoning)


def attempt(tools, answers, task=HELLO, timeout=None, **agent_kw):
    if timeout:
        task = type(task)(**{**task.to_dict(), "agent_timeout": timeout})
    ctx = RunContext(
        "local",
        ScriptedBackend(answers),
        TEMPLATE,
        AgentConfig(**agent_kw),
        [r"(?i)no such file"],
        {"toolchain": tools},
    )
    out = run_attempt(task, 0, 0, ctx, seed=0, live=LiveSandboxes(), transcript=None)
    assert sandboxes_left(harnesses=OURS) == []  # always torn down
    return {**out.record.to_dict(), "messages": out.messages}


SOLVE = [answer("echo hello > /app/out.txt\n"), answer(done=True), answer(done=True)]


def test_solving_and_confirming(tools):
    rec = attempt(tools, [answer("echo hello > /app/out.txt\n", duration=1), *SOLVE[1:]])
    assert rec["success"] and rec["failure_mode"] == "none" and rec["ended"] == "completed"
    assert rec["episodes"] == 3 and rec["first_complete_episode"] == 1
    msgs = rec["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant"] * 3
    assert (
        "echo hello > /app/out.txt" in msgs[2]["content"]
        and "mark the task as complete" in msgs[4]["content"]
    )


def test_a_complete_not_confirmed_twice_in_a_row_does_not_end(tools):
    rec = attempt(
        tools,
        [
            answer("echo hello > /app/out.txt\n"),
            answer(done=True),
            answer("ls\n"),
            answer(done=True),
            answer(done=True),
        ],
    )
    assert rec["ended"] == "completed" and rec["episodes"] == 5 and rec["success"]


def test_parse_errors_run_nothing_and_are_reported(tools):
    rec = attempt(
        tools,
        ['{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "echo hello > /app/out.txt\\n"', *SOLVE],
    )
    assert rec["success"] and rec["parse_errors"] == 1 and rec["episodes"] == 4
    assert rec["messages"][2]["content"].startswith("Your answer could not be used:\n")


def test_garbage_forever_ends_as_parse_exhausted(tools):
    rec = attempt(tools, ["I will not answer in JSON."], max_consecutive_parse_errors=4)
    assert rec["failure_mode"] == "parse_exhausted" and rec["episodes"] == 4 and rec["timing"]["agent"] < 10


IDLE = {"capture": "idle", "capture_idle_max_s": 30}  # the screen read once the command is done, however slow


def test_errors_in_observations_are_signatures(tools):
    rec = attempt(tools, [answer("cat /app/missing.txt\n"), *SOLVE], **IDLE)
    assert rec["success"] and rec["error_signatures"] == [{"pattern": "(?i)no such file", "episode": 0}]


def test_sleep_forever_ends_at_the_agent_timeout(tools):
    rec = attempt(tools, [answer("sleep 100000\n", duration=100000)], timeout=3)
    assert rec["ended"] == "agent_timeout" and rec["failure_mode"] == "agent_timeout"
    # the wait was cut at the deadline (the agent's phase: the whole attempt adds start, grading, teardown)
    assert rec["timing"]["agent"] < 3 + 7


def test_long_output_keeps_head_and_tail(tools):
    # 1,500 lines of 7 bytes: over 10,000 bytes but within tmux's 2,000 lines of history
    rec = attempt(tools, [answer("seq 1000001 1001500\n"), *SOLVE], **IDLE)
    obs = rec["messages"][2]["content"]
    assert len(obs.encode()) < 10_200 and "bytes cut here" in obs and rec["success"]
    assert "seq 1000001 1001500\n1000001\n1000002\n" in obs and "1001499\n1001500\n" in obs


def test_more_lines_than_the_history_keeps_as_terminus_2(tools):
    """Their diff, kept: past tmux's 2,000 lines the previous capture is gone. Right after the first
    screen (one line: the prompt) the prompt is found again at the end, so only it shows; later the
    previous text is not found and the screen is shown instead."""
    rec = attempt(tools, [answer("seq 1 3000\n"), answer("seq 5001 8000\n"), *SOLVE], **IDLE)
    first, second = rec["messages"][2]["content"], rec["messages"][4]["content"]
    assert first == "New Terminal Output:\nroot@box:/app#\n"
    assert second.startswith("Current Terminal Screen:\n") and "7999\n8000\n" in second
    assert "\n5001\n5002\n" not in second and rec["success"]


def test_output_flood_is_bounded(tools):
    rec = attempt(
        tools, [answer("yes | head -c 30000000\n", duration=3), answer("C-c", duration=0.5), *SOLVE]
    )
    obs = rec["messages"][2]["content"]
    assert len(obs.encode()) < 10_200 and rec["success"]


def test_a_long_heredoc_is_pasted_whole(tools):
    body = "".join(f"line {i} ' \" $ ✓\n" for i in range(1200))  # ~25 kB: over one tmux command
    paste = answer(f"cat > /app/big.txt << 'EOF'\n{body}EOF\n")
    rec = attempt(
        tools, [paste, answer("wc -l < /app/big.txt\n"), *SOLVE], **IDLE
    )  # read once bash has echoed it
    assert "\n1200\n" in rec["messages"][4]["content"] and rec["success"]


BUSY = "python3 -c \"sum(range(3 * 10**7)); print('counted')\"\n"  # about a second of CPU


def test_an_idle_capture_waits_for_a_busy_command_and_a_timed_one_does_not(tools):
    timed = attempt(tools, [answer(BUSY), *SOLVE])  # Terminus-2's timing: 0.1 s after the keys
    idle = attempt(tools, [answer(BUSY), *SOLVE], **IDLE)
    assert "\ncounted\n" not in timed["messages"][2]["content"]  # (the command line holds the word too)
    assert "counted\nroot@box:/app#" in idle["messages"][2]["content"] and idle["success"]


def test_an_idle_capture_gives_up_at_its_bound(tools):
    """A shell that never idles (a busy loop in bash itself) is read after capture_idle_max_s."""
    busy = [answer("while :; do :; done\n"), answer("C-c"), *SOLVE]
    rec = attempt(tools, busy, timeout=60, capture="idle", capture_idle_max_s=1)
    assert rec["ended"] == "completed" and rec["success"] and rec["seconds"] < 30
    assert rec["messages"][2]["content"].rstrip().endswith("while :; do :; done")


def test_writes_outside_app_fail_and_the_host_is_untouched(tools, tmp_path):
    from pathlib import Path

    canary = Path("/tmp") / "horizon-agent-canary"
    canary.write_text("host")
    try:
        rec = attempt(
            tools,
            [answer(f"echo x > {canary}; echo y > /etc/passwd; echo z > /usr/local/x\n", duration=1), *SOLVE],
        )
        assert canary.read_text() == "host" and rec["success"]
        assert "Read-only file system" in rec["messages"][2]["content"]
    finally:
        canary.unlink()


def test_fork_bomb_ends_the_attempt_as_sandbox_exhausted_and_leaves_nothing(tools):
    # the next answers leave the task unsolved: keystrokes typed into a saturated shell can still run
    # when a fork gets through, and the grade reads the sandbox's final state (a solving echo made
    # one run in five a success, with the attempt still ended by the exhaustion)
    wrong = [answer("echo nope > /app/out.txt\n"), answer(done=True), answer(done=True)]
    rec = attempt(tools, [answer(":(){ :|:& };:\n", duration=2), *wrong], timeout=20)
    assert rec["failure_mode"] == "sandbox_exhausted" and rec["ended"] == "sandbox_exhausted"
    assert "at its limits (processes" in rec["evidence"] and rec["timing"]["agent"] < 20 + 20


def test_killing_tmux_ends_the_attempt_as_terminal_lost(tools):
    rec = attempt(tools, [answer("tmux kill-server\n"), *SOLVE])
    assert rec["ended"] == "terminal_lost" and rec["failure_mode"] == "terminal_lost"
    assert "tmux" in rec["evidence"] and "the sandbox is up and runs commands" in rec["evidence"]


def task_copy(tmp_path, name="hello", test_sh=None, env=None, tests_files=None):
    """The hello fixture task, changed: its test script, its [environment], extra files under tests/."""
    import shutil

    d = tmp_path / name
    shutil.copytree(FIXTURES / "harbor-tasks" / "hello", d)
    if test_sh is not None:
        (d / "tests" / "test.sh").write_text(test_sh)
    if env is not None:
        toml = (d / "task.toml").read_text()
        (d / "task.toml").write_text(toml + "".join(f"{k} = {v}\n" for k, v in env.items()))
    for rel, data in (tests_files or {}).items():
        (d / "tests" / rel).write_bytes(data)
    return load_harbor(d)


def repeat_of(tools, task, answers, tmp_path):
    """run_repeat with one attempt and no retry: what the rollout job records."""
    from horizon.eval.rollout import run_repeat

    ctx = RunContext("local", ScriptedBackend(answers), TEMPLATE, AgentConfig(), [], {"toolchain": tools})
    [rec] = run_repeat([task], 1, 0, ctx, tmp_path / "attempts.jsonl", seed=0, max_infra_retries=0)
    assert sandboxes_left(harnesses=OURS) == []
    return rec.to_dict()


def test_the_harness_failing_to_put_the_tests_in_is_an_infra_error(tools, tmp_path):
    # /tests is as large as the task's storage: a 2 MB test file in 1 MB does not go in (not the agent's doing)
    task = task_copy(tmp_path, env={"storage_mb": 1}, tests_files={"data.bin": b"x" * (2 << 20)})
    rec = repeat_of(tools, task, SOLVE, tmp_path)
    assert rec["failure_mode"] == "infra_error" and "putting the tests in failed" in rec["error"]
    assert rec["evidence"].startswith("healthy: the sandbox is up and runs commands")


def test_a_sandbox_ended_from_the_host_is_an_infra_error_with_its_evidence(tools, tmp_path):
    import os
    import signal

    from horizon.eval.sandbox.local.sandbox import LocalSandbox

    started = []
    real_start = LocalSandbox.start

    def start(self):
        real_start(self)
        started.append(self)

    def model(messages):  # FAKE model: on its second call, the host (not the agent) ends the sandbox
        if sum(m["role"] == "assistant" for m in messages) == 1:
            os.kill(started[-1].init_pid, signal.SIGKILL)
        return SOLVE[min(sum(m["role"] == "assistant" for m in messages), 2)]

    LocalSandbox.start = start
    try:
        rec = repeat_of(tools, HELLO, model, tmp_path)
    finally:
        LocalSandbox.start = real_start
    assert rec["failure_mode"] == "infra_error"
    assert "pid 1 (immune to signals from inside) was killed by signal 9" in rec["evidence"]


@pytest.mark.parametrize(
    "written, error",
    [
        # as Harbor reads it: a JSON value that is not an object of numbers (a lone key is a valid reward there)
        ("echo '[1]' > /logs/verifier/reward.json", "reward.json: [1] is not a finite number"),
        ("echo '1 passed' > /logs/verifier/reward.txt", "reward.txt: '1 passed' is not a number"),
        ("mkfifo /logs/verifier/reward.txt", "reward.txt: could not be read (not a regular file)"),
    ],
)
def test_an_invalid_reward_is_named_not_guessed(tools, tmp_path, written, error):
    task = task_copy(tmp_path, test_sh=f"#!/bin/bash\n{written}\n")
    rec = repeat_of(tools, task, SOLVE, tmp_path)
    assert rec["failure_mode"] == "reward_invalid" and rec["evidence"].startswith(error), rec


def test_context_overflow_is_its_own_failure_mode_with_context_stop(tools):
    rec = attempt(tools, [answer("ls\n")] * 5, context_length=300, max_tokens=256, context="stop")
    assert rec["failure_mode"] == "context_length" and rec["summarizations"] == 0


def test_the_history_is_summarised_and_the_attempt_goes_on(tools):
    big = "x" * 2000  # ~500 tokens per answer for the scripted backend's count
    answers = [
        answer("echo hello > /app/out.txt\n", analysis=big), answer("ls\n", analysis=big),
        "SUMMARY: wrote out.txt", "QUESTIONS: is it right?", "ANSWERS: yes",
        answer(done=True), answer(done=True),
    ]  # fmt: skip
    rec = attempt(tools, answers, context_length=2000, summarize_threshold=1000)
    assert rec["success"] and rec["summarizations"] == 1 and rec["summary_calls"] == 3
    assert rec["model_calls"] == 7 and rec["episodes"] == 4


def test_tb1_grading_with_uv_and_pytest_offline(tools):
    task = load_tb1(FIXTURES / "tb1-tasks" / "hello-tb1")
    ok = attempt(tools, SOLVE, task=task)
    assert ok["success"] and ok["reward"] == 1.0
    bad = attempt(
        tools, [answer("echo bye > /app/out.txt\n"), answer(done=True), answer(done=True)], task=task
    )
    assert not bad["success"] and bad["reward"] == 0.5 and bad["failure_mode"] == "tests_failed"


def test_harbor_json_reward(tools):
    tasks, _ = load_benchmark(FIXTURES / "harbor-tasks", "harbor", only=["json-reward"])
    rec = attempt(tools, [answer(done=True), answer(done=True)], task=tasks[0])
    assert not rec["success"] and rec["reward"] == 0.25


def test_transcripts_record_the_conversation(tools, tmp_path):
    ctx = RunContext("local", ScriptedBackend(SOLVE), TEMPLATE, AgentConfig(), [], {"toolchain": tools})
    path = tmp_path / "t.json"
    run_attempt(HELLO, 0, 0, ctx, 0, LiveSandboxes(), path)
    t = json.loads(path.read_text())
    assert t["success"] and len(t["messages"]) == 6 and t["grader"]["detail"]["reward_found"]


def test_an_endpoint_that_answers_nothing_is_recorded(tools, tiny_tokenizer_dir, tmp_path):
    """FAKE endpoint (an HTTP server in this test): an empty text is a parse error of the model; an
    answer without choices is an infrastructure error, retried, then recorded (never a crash)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from horizon.eval.models.backends import CompletionsBackend
    from horizon.eval.rollout import run_repeat

    replies = iter([{"choices": [{"text": "", "finish_reason": "stop"}]}] * 3 + [{"choices": []}] * 20)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            data = json.dumps(
                {**next(replies), "usage": {"prompt_tokens": 5, "completion_tokens": 0}}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        backend = CompletionsBackend(f"http://127.0.0.1:{server.server_port}", tiny_tokenizer_dir, retries=0)
        ctx = RunContext("local", backend, TEMPLATE, AgentConfig(), [], {"toolchain": tools})
        out = tmp_path / "attempts.jsonl"
        [rec] = run_repeat([HELLO], 1, 0, ctx, out, seed=0, max_infra_retries=1)
    finally:
        server.shutdown()
    assert rec.failure_mode == "infra_error" and rec.infra_tries == 2 and "no choices" in rec.error
    assert json.loads(out.read_text())["failure_mode"] == "infra_error"
    assert sandboxes_left(harnesses=OURS) == []
