"""Task synthesis without a sandbox: seeds (quarantine with line numbers), a stage's answer as files,
the reviewer's verdict, task.toml, and an endpoint that is down (against the SCRIPTED synthesis
server, tests/fixtures/scripted_synth.py: a FAKE, no model behind it)."""

import json
import re

import pytest

from horizon.eval.llm import ChatBackend
from horizon.eval.tasks import load_harbor
from horizon.synth.cascade import task_toml
from horizon.synth.files import BadAnswer, parse_files, parse_review
from horizon.synth.run import SynthError, synthesize
from horizon.synth.seeds import Seed, load_seeds, read_qa
from horizon.synth.verify import output_paths
from tests.helpers import FIXTURES, REPO, scripted_synth_server, synth_settings

SEEDS = FIXTURES / "synth" / "seeds.jsonl"
PROMPTS = REPO / "workflow" / "synth" / "prompts"


def test_seeds_quarantine_rows_with_their_line_numbers():
    s = read_qa(SEEDS, min_score=5)
    assert [x.id for x in s.seeds] == ["so-101", "so-102", "so-103", "so-104", "so-105", "so-106"]
    assert s.below_min_score == ["so-108"]
    assert [(q["line"], q["reason"]) for q in s.quarantine] == [
        (7, "missing field(s) accepted_answer"),
        (8, "not JSON (Expecting value: line 1 column 1 (char 0))"),
    ]
    assert s.counts() == {"seeds": 6, "quarantined": 2, "below_min_score": 1}
    assert s.seeds[0].tags == ("bash", "wc") and s.seeds[0].score == 41


def test_seeds_bad_scores_duplicates_and_domains(tmp_path):
    f = tmp_path / "s.jsonl"
    rows = [{"id": 1, "question": "q", "accepted_answer": "a", "score": "many"},
            {"id": 2, "question": "q", "accepted_answer": "a", "score": 3}, [1, 2],
            {"id": 2, "question": "q", "accepted_answer": "a", "score": 3}]  # fmt: skip
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    s = load_seeds(f, {"Text processing": 2}, min_score=0)
    assert [x.id for x in s.seeds] == ["so-2", "text-processing-0", "text-processing-1"]
    assert [q["reason"] for q in s.quarantine] == [
        "score 'many' is not a number", "the row is not a JSON object", "duplicate id so-2"]  # fmt: skip
    with pytest.raises(ValueError, match="also a Q&A seed"):
        load_seeds(f, {"so": 3}, min_score=0)  # so-2 twice


def test_answer_as_files():
    ans = (
        '<think>\n<file path="x">no</file>\n</think>\n<file path="environment/Dockerfile">\nFROM x\n</file>\n'
    )
    assert parse_files(ans, ("environment/Dockerfile",), ("environment",)) == {
        "environment/Dockerfile": "FROM x\n"
    }
    for bad, why in [
        ("Sure, here is a Dockerfile: FROM x", "no <file path"),
        ('<file path="environment/Dockerfile">FROM x', "not closed"),
        ('<file path="../etc/passwd">x</file>', "not a relative path"),
        ('<file path="/environment/Dockerfile">x</file>', "not a relative path"),
        ('<file path="tests/test.sh">x</file>', "outside what this stage writes"),
        ('<file path="environment/files/a.txt">x</file>', "required file(s) missing: environment/Dockerfile"),
    ]:
        with pytest.raises(BadAnswer, match=re.escape(why)):
            parse_files(bad, ("environment/Dockerfile",), ("environment",))


def test_review_verdicts():
    assert parse_review('{"approve": true}') == (True, [])
    assert parse_review('<think>hm</think>{"approve": false, "findings": ["a"]}') == (False, ["a"])
    for bad in [
        "looks good",
        '{"approve": "yes"}',
        '{"approve": false}',
        '{"approve": false, "findings": [1]}',
    ]:
        with pytest.raises(BadAnswer):
            parse_review(bad)


def test_task_toml_is_a_harbor_task(tmp_path):
    seed = Seed("so-1", "qa", tags=("bash", 'bad"tag'))
    s = synth_settings(
        model="a", review_model="r", resources={"cpus": 2, "memory_mb": 512, "agent_timeout_sec": 90}
    )
    (tmp_path / "so-1" / "environment").mkdir(parents=True)
    (tmp_path / "so-1" / "environment" / "Dockerfile").write_text("FROM x\nWORKDIR /app\n")
    (tmp_path / "so-1" / "tests").mkdir()
    (tmp_path / "so-1" / "tests" / "test.sh").write_text("exit 0\n")
    (tmp_path / "so-1" / "instruction.md").write_text("Write /app/out.txt.\n")
    (tmp_path / "so-1" / "task.toml").write_text(task_toml(seed, s))
    t = load_harbor(tmp_path / "so-1")
    assert (t.cpus, t.memory_mb, t.agent_timeout, t.allow_internet) == (2, 512, 90.0, False)
    assert t.extra["tags"] == ["synthesized", "qa", "bash"] and not t.warnings


def test_output_paths_of_an_instruction():
    text = "Read /app/in.txt and write /app/out/result.json. Then /app/out/result.json again, see /etc/x."
    assert output_paths(text) == ["/app/in.txt", "/app/out/result.json"]


def test_endpoint_down_is_a_named_error_and_nothing_is_journaled(tmp_path):
    seeds = load_seeds(SEEDS, None, 5)
    with scripted_synth_server("--status", 503) as url:
        backend = ChatBackend(url, "author", retries=0)
        with pytest.raises(
            SynthError, match=r"endpoint failed .*503.*0 of 6 seeds are finished.*rerun to resume"
        ):
            synthesize(seeds, backend, backend, synth_settings(model="author"), PROMPTS, tmp_path,
                       concurrency=1)  # fmt: skip
    assert not (tmp_path / "synth.partial.jsonl").exists() and not (tmp_path / "tasks.json").exists()


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
