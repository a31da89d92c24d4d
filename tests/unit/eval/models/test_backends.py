"""Model backends against FAKE servers (tests/doubles/fake_vllm.py as `vllm serve`, the SCRIPTED synthesis
server as a chat endpoint): the training serialization as the prompt, infrastructure errors, prefix
caching, prompts that extend each other, concurrent attempts, reasoning and context overflow."""

import json
import sys

import pytest

from horizon.data.chatml import ChatSerializer
from horizon.eval.models.backends import (
    BackendError,
    ChatBackend,
    CompletionsBackend,
    TransformersBackend,
    VLLMServer,
)
from horizon.terminus import parse_response
from tests.doubles.servers import FAKE_VLLM, scripted_synth_server
from tests.helpers import REPO, fixture_rows

CONV = fixture_rows()[0]["conversations"][:5]  # ends with a user turn: the next prompt


def test_completions_prompt_is_the_training_serialization(
    tiny_tokenizer_dir, tiny_tokenizer, tmp_path, monkeypatch
):
    """Through a FAKE vllm (no GPU here): the token ids sent equal the training serialization + header."""
    log = tmp_path / "requests.jsonl"
    monkeypatch.setenv("FAKE_VLLM_LOG", str(log))
    server = VLLMServer(
        "/models/x",
        context_length=4096,
        seed=3,
        extra_args=["--reasoning-parser", "qwen3"],
        command=[sys.executable, str(FAKE_VLLM), "serve"],
        startup_timeout=30,
    )
    with server:
        backend = CompletionsBackend(server.base_url, tiny_tokenizer_dir, model=server.name, temperature=0.6)
        out = backend.complete(CONV, seed=11, max_tokens=64)
    assert server.proc.poll() is not None  # stopped
    assert parse_response(out.text).task_complete and out.completion_tokens == 17
    req = json.loads(log.read_text().splitlines()[0])
    ser = ChatSerializer(tiny_tokenizer)
    train = ser.serialize(CONV).input_ids.tolist()
    assert req["request"]["prompt"] == train + ser.head("assistant")
    assert req["request"]["seed"] == 11 and req["request"]["stop_token_ids"] == [ser.im_end]
    argv = req["argv"]
    assert argv[1] == "/models/x" and argv[argv.index("--max-model-len") + 1] == "4096"
    assert "--reasoning-parser" in argv and argv[argv.index("--seed") + 1] == "3"


def test_a_server_that_dies_at_start_is_an_infra_error(tmp_path):
    server = VLLMServer(
        "/m",
        4096,
        0,
        command=[sys.executable, str(FAKE_VLLM), "serve", "--fail"],
        log_path=tmp_path / "vllm.log",
        startup_timeout=30,
    )
    with pytest.raises(BackendError, match="exited with 3 before it was healthy"):
        server.start()


def test_unreachable_endpoint_is_an_infra_error(tiny_tokenizer_dir):
    b = CompletionsBackend("http://127.0.0.1:9", tiny_tokenizer_dir, retries=0)
    with pytest.raises(BackendError, match="127.0.0.1:9"):
        b.complete(CONV, seed=0, max_tokens=8, timeout=2)


def test_transformers_backend_generates_from_the_training_serialization(tiny_corpus):
    b = TransformersBackend(tiny_corpus / "student", tiny_corpus / "student", temperature=0.0)
    ser = ChatSerializer(b.tokenizer)
    assert b.prompt_ids(CONV) == ser.serialize(CONV).input_ids.tolist() + ser.head("assistant")
    a = b.complete(CONV, seed=1, max_tokens=12)
    assert a.prompt_tokens == len(b.prompt_ids(CONV)) and 0 < a.completion_tokens <= 12
    assert a.text == b.complete(CONV, seed=1, max_tokens=12).text  # greedy: reproducible


def fake_server(tmp_path, monkeypatch, prefix_caching=True, **env) -> VLLMServer:
    monkeypatch.setenv("FAKE_VLLM_LOG", str(tmp_path / "requests.jsonl"))
    for key, value in env.items():
        monkeypatch.setenv(f"FAKE_VLLM_{key.upper()}", str(value))
    return VLLMServer("/models/x", context_length=4096, seed=3, startup_timeout=30, prefix_caching=prefix_caching,
                      command=[sys.executable, str(FAKE_VLLM), "serve"])  # fmt: skip


def logged(tmp_path) -> list[dict]:
    return [json.loads(x) for x in (tmp_path / "requests.jsonl").read_text().splitlines()]


def test_prefix_caching_is_on_by_default_and_can_be_switched_off():
    on = VLLMServer("/m", 4096, 0).argv()
    off = VLLMServer("/m", 4096, 0, prefix_caching=False).argv()
    assert "--enable-prefix-caching" in on and "--enable-prompt-tokens-details" in on
    assert "--no-enable-prefix-caching" in off and "--enable-prefix-caching" not in off


def test_each_episode_prompt_extends_the_previous_prompt_and_answer(
    tiny_tokenizer_dir, tmp_path, monkeypatch
):
    """Through a FAKE vllm (no GPU here) that keeps what vLLM's prefix cache would: over a multi-episode
    conversation (the demo's template; observations with blank lines, unicode, a parse error), the token
    ids of episode n+1 start with episode n's prompt, its answer's tokens and the stop token, so the
    server serves all but the last partial block of the history from its cache."""
    from horizon.eval.agent.prompts import Template

    answers = [
        '<think>\nlook around\n</think>\n\n{"analysis": "a", "plan": "p", "commands": '
        '[{"keystrokes": "ls -la\\n", "duration": 0.1}], "task_complete": false}',
        "<think>\nhmm\n</think>\n\nnot json at all",
        '<think>\nwrite it\n</think>\n\n{"analysis": "ü", "plan": "p", "commands": [], "task_complete": true}',
        '<think>\nsure\n</think>\n\n{"analysis": "done", "plan": "", "commands": [], "task_complete": true}',
    ]
    (tmp_path / "answers.json").write_text(json.dumps(answers))
    template = Template.load(REPO / "demo" / "prompt.yaml")
    server = fake_server(tmp_path, monkeypatch, answers=tmp_path / "answers.json",
                         tokenizer=tiny_tokenizer_dir / "tokenizer.json")  # fmt: skip
    turns = [
        template.render("observation", output="total 0\n\n  drwxr-xr-x 2 root root 40 .\n\n"),
        template.render("parse_error", error="ERROR: no JSON object found"),
        template.render("confirm", output="  größe: 3 kB\t(ok)\n"),
    ]
    with server:
        backend = CompletionsBackend(server.base_url, tiny_tokenizer_dir, model=server.name)
        msgs = [{"role": "user", "content": template.first("Count the words.", "root@box:/app# ")}]
        cached = []
        for turn in turns + [None]:
            out = backend.complete(msgs, seed=1, max_tokens=64)
            cached.append(out.cached_tokens)
            msgs.append({"role": "assistant", "content": out.text})
            if turn is not None:
                msgs.append({"role": "user", "content": turn})
        backend.close()
    prompts = [r["request"]["prompt"] for r in logged(tmp_path)]
    ser = ChatSerializer(backend.tokenizer)
    assert len(prompts) == 4 and cached[0] == 0
    for n in range(3):
        answer = ser.backend.encode(answers[n], add_special_tokens=False).ids
        history = prompts[n] + answer + [ser.im_end]
        assert prompts[n + 1][: len(history)] == history
        assert cached[n + 1] == (len(prompts[n]) + len(answer)) // 16 * 16  # the server's cache covers it


def test_concurrent_attempts_are_in_flight_against_one_server_at_once(
    tiny_tokenizer_dir, tmp_path, monkeypatch
):
    """eval.concurrency threads share one backend (one openai client: httpx's client is thread safe) and
    their requests overlap at the (FAKE) server instead of queueing behind each other."""
    from concurrent.futures import ThreadPoolExecutor

    server = fake_server(tmp_path, monkeypatch, delay=2)  # long enough to overlap on a loaded machine
    with server:
        backend = CompletionsBackend(server.base_url, tiny_tokenizer_dir, model=server.name)
        with ThreadPoolExecutor(4) as pool:
            outs = list(pool.map(lambda i: backend.complete(CONV, seed=i, max_tokens=8), range(4)))
        backend.close()
    assert all(parse_response(o.text).task_complete for o in outs)
    spans = [(r["start"], r["end"]) for r in logged(tmp_path)]
    overlap = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert overlap == 4, spans


def test_chat_backend_reasoning_usage_and_context_overflow():
    task = [{"role": "user", "content": "Task Description:\nCount the words in /app/input.txt and write the number "
             "alone on one line to /app/count.txt.\n"}]  # fmt: skip
    with scripted_synth_server("--reasoning", "--context-limit", 2000) as url:
        backend = ChatBackend(url, "teacher")
        out = backend.complete(task, seed=1, max_tokens=256)
        assert out.text.startswith("<think>\nscripted teacher\n</think>\n\n{") and out.finish_reason == "stop"
        assert '"keystrokes": "wc -w < /app/input.txt' in out.text
        assert (
            out.prompt_tokens == len(task[0]["content"]) // 4 and out.completion_tokens > 0
        )  # the server's usage
        long = [{"role": "user", "content": "x" * 3000}]
        assert backend.complete(long, seed=1, max_tokens=256).finish_reason == "context_length"
        assert backend.prompt_tokens(long) == 3000 // 3 + 4  # no tokenizer given: 3 characters a token
