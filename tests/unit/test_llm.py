"""Model backends: evaluation prompts are the training serialization; the vLLM server lifecycle."""

import json
import sys

import pytest

from horizon.data.chat import ChatSerializer
from horizon.eval.llm import BackendError, CompletionsBackend, TransformersBackend, VLLMServer
from horizon.terminus import parse_response
from tests.helpers import FIXTURES, fixture_rows

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
        command=[sys.executable, str(FIXTURES / "fake_vllm.py"), "serve"],
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
        command=[sys.executable, str(FIXTURES / "fake_vllm.py"), "serve", "--fail"],
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
