"""Seeds -> verified Harbor tasks -> a teacher's corpus that normalize accepts, against the SCRIPTED
synthesis server (tests/doubles/scripted_synth.py: a FAKE author, reviewer and teacher; no model behind
it) with real verification in the local bubblewrap sandbox. Each canned seed exercises one outcome:
kept at once, a broken Dockerfile (build), a wrong solution (round trip), tests a lazy attempt passes
(attack), a review that changes a test (kept after a round), an answer that is not files."""

import json
import sys

import pytest

from horizon.data.normalize import normalize
from horizon.data.sources import download
from horizon.eval.agent.loop import AgentConfig
from horizon.eval.collect.corpus import collect_teacher
from horizon.eval.models.backends import ChatBackend
from horizon.eval.tasks.benchmark import read_manifest
from horizon.synth.run import SynthError, synthesize
from horizon.synth.seeds import load_seeds
from tests.doubles.servers import FAKE_VLLM, scripted_synth_server
from tests.helpers import FIXTURES, REPO, synth_settings

pytestmark = pytest.mark.engine
PROMPTS = REPO / "workflow" / "synth" / "prompts"


def lines(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_seeds_to_verified_tasks_to_a_corpus(tools, tmp_path):
    seeds = load_seeds(FIXTURES / "synth" / "seeds.jsonl", None, min_score=5)
    settings = synth_settings(
        model="author",
        review_model="reviewer",
        resources={"agent_timeout_sec": 60, "verifier_timeout_sec": 60},
    )
    out, log = tmp_path / "synth", tmp_path / "server.jsonl"
    with scripted_synth_server(log=log) as url:
        author, reviewer = ChatBackend(url, "author"), ChatBackend(url, "reviewer")

        def run():
            return synthesize(seeds, author, reviewer, settings, PROMPTS, out, "local", {"toolchain": tools})

        stats = run()
        assert stats["kept"] == 2 and stats["quarantined"] == 2 and stats["below_min_score"] == 1
        assert stats["rejected"] == {"environment": 1, "build": 1, "round_trip": 1, "attack": 1}
        assert (
            stats["passed"]["build"] == 4
            and stats["passed"]["round_trip"] == 3
            and stats["passed"]["attack"] == 2
        )
        rej = {r["seed"]: r for r in lines(out / "rejections.jsonl")}
        assert "COPY: data.csv: no such file in the build context" in rej["so-102"]["reason"]
        assert rej["so-103"]["stage"] == "round_trip" and "fails the tests" in rej["so-103"]["reason"]
        assert "empty files at /app/report.txt" in rej["so-104"]["reason"]
        assert rej["so-106"]["stage"] == "environment" and "Sure! You could create" in rej["so-106"]["log"]
        tasks, errors = read_manifest(out / "tasks.json")
        assert [t.id for t in tasks] == ["so-101", "so-105"] and not errors
        kept = {r["seed"]: r for r in lines(out / "synth.partial.jsonl")}
        assert [r["approve"] for r in kept["so-105"]["review"]] == [False, True]  # one revision, then kept
        assert (
            "printf 'alice\\nbob\\ncarol\\n'" in (out / "tasks" / "so-105" / "tests" / "test.sh").read_text()
        )
        assert set(kept["so-101"]["sandbox_seconds"]) == {"build", "solution", "tests", "attack"}
        calls = len(lines(log))
        assert run() == stats and len(lines(log)) == calls  # resumed: no seed asked again

        teacher = ChatBackend(url, "teacher")
        corpus = tmp_path / "corpus.jsonl"
        usage = collect_teacher(out / "tasks.json", REPO / "demo" / "prompt.yaml", corpus, teacher, "teacher",
                                attempts=2, sandbox_options={"toolchain": tools}, agent=AgentConfig(max_episodes=6),
                                price={"input": 2.0, "output": 8.0})  # fmt: skip
        assert (usage["successes"], usage["failures"]) == (2, 2)  # so-105's teacher writes the names unsorted
        assert usage["per_task"] == {
            "so-101": {"successes": 2, "failures": 0},
            "so-105": {"successes": 0, "failures": 2},
        }
        cost = (usage["prompt_tokens"] * 2.0 + usage["completion_tokens"] * 8.0) / 1e6
        assert usage["prompt_tokens"] > 0 and usage["cost_usd"] == pytest.approx(cost)
        calls = len(lines(log))
        assert collect_teacher(out / "tasks.json", REPO / "demo" / "prompt.yaml", corpus, teacher, "teacher",
                               attempts=2, price={"input": 2.0, "output": 8.0}) == usage and len(lines(log)) == calls  # fmt: skip
    rows = lines(corpus)
    assert {r["trial_name"] for r in rows} == {"so-101__a0", "so-101__a1"} and rows[0]["model"] == "teacher"
    assert len(lines(tmp_path / "corpus.failures.jsonl")) == 2
    download(str(corpus), tmp_path / "raw")
    st = normalize(
        tmp_path / "raw/manifest.json", tmp_path / "t.parquet", tmp_path / "q.parquet", tmp_path / "s.json"
    )
    # both attempts of the deterministic FAKE teacher are the same conversation: kept once
    assert (st["completed"], st["duplicates"], st["quarantined"]) == (1, 1, {})


def test_an_endpoint_that_dies_mid_run_resumes_without_asking_finished_seeds_again(tools, tmp_path):
    seeds = load_seeds(FIXTURES / "synth" / "seeds.jsonl", None, min_score=5)
    settings = synth_settings(model="author", review_model="reviewer")
    out, log = tmp_path / "synth", tmp_path / "server.jsonl"

    def run(url):
        backend = ChatBackend(url, "author", retries=0)
        return synthesize(
            seeds, backend, backend, settings, PROMPTS, out, "local", {"toolchain": tools}, concurrency=1
        )

    with scripted_synth_server("--die-after", 9, log=log) as url, pytest.raises(SynthError) as e:
        run(url)
    finished = lines(out / "synth.partial.jsonl")
    assert f"{len(finished)} of 6 seeds are finished" in str(e.value) and 1 <= len(finished) < 6
    asked = len(lines(log))
    with scripted_synth_server(log=log) as url:
        stats = run(url)
    assert stats["kept"] == 2 and stats["processed"] == 6
    again = {r["seed"] for r in lines(log)[asked:]}
    assert again.isdisjoint(r["seed"] for r in finished)  # no finished seed asked again


def test_a_local_teacher_served_by_vllm_collects_through_the_chat_route(tools, tmp_path, monkeypatch):
    """`collect.teacher.vllm_model`: a FAKE `vllm serve` (tests/doubles/fake_vllm.py; no GPU here) started
    for the collection, answering the chat route; stopped after it."""
    from horizon.eval.collect.corpus import collect_with_teacher
    from horizon.eval.tasks.benchmark import write_manifest

    write_manifest(REPO / "demo" / "tasks", "harbor", tmp_path / "tasks.json", only=["sort-names"])
    solve = {"analysis": "a", "plan": "p", "commands": [{"keystrokes": "sort -u names.txt > sorted.txt\n",
             "duration": 0.1}], "task_complete": False}  # fmt: skip
    done = {"analysis": "done", "plan": "", "commands": [], "task_complete": True}
    script = {"tasks": [{"match": "Sort the names", "answers": [json.dumps(solve), json.dumps(done)]}]}
    (tmp_path / "script.json").write_text(json.dumps(script))
    monkeypatch.setenv("FAKE_VLLM_SCRIPT", str(tmp_path / "script.json"))
    monkeypatch.setenv("FAKE_VLLM_LOG", str(tmp_path / "requests.jsonl"))
    teacher = {"endpoint": None, "vllm_model": "/models/teacher", "model": "teacher", "api_key_env": "NONE",
               "temperature": 0.7, "top_p": 1.0, "max_tokens": 512, "context_length": 8192, "max_episodes": 6,
               "max_retries": 0, "timeout_s": 60, "tokenizer": None, "price": {}}  # fmt: skip
    c = {"variants": 2, "concurrency": 2, "teacher": teacher}
    usage = collect_with_teacher(c, tmp_path / "tasks.json", REPO / "demo" / "prompt.yaml", tmp_path / "c.jsonl",
                                 "local", {"toolchain": tools}, 0,
                                 vllm_command=[sys.executable, str(FAKE_VLLM), "serve"])  # fmt: skip
    assert (usage["successes"], usage["failures"]) == (2, 0)
    assert {json.loads(x)["path"] for x in (tmp_path / "requests.jsonl").read_text().splitlines()} == {
        "/v1/chat/completions"}  # fmt: skip


@pytest.mark.slow
def test_docker_verification_keeps_and_rejects_the_same_seeds(tools, dockerd, tmp_path):
    """The same seeds verified under `eval.sandbox: docker` (each task's Dockerfile built by the tests'
    daemon): the same tasks kept, the same stage for each rejection as in the local sandbox."""
    seeds = load_seeds(FIXTURES / "synth" / "seeds.jsonl", None, min_score=5)
    settings = synth_settings(model="author", review_model="reviewer")
    out = tmp_path / "synth"
    with scripted_synth_server() as url:
        author, reviewer = ChatBackend(url, "author"), ChatBackend(url, "reviewer")
        stats = synthesize(seeds, author, reviewer, settings, PROMPTS, out, "docker", {"toolchain": tools})
    assert stats["kept"] == 2
    assert stats["rejected"] == {"environment": 1, "build": 1, "round_trip": 1, "attack": 1}
    rej = {r["seed"]: r for r in lines(out / "rejections.jsonl")}
    assert {s: r["stage"] for s, r in rej.items()} == {
        "so-102": "build", "so-103": "round_trip", "so-104": "attack", "so-106": "environment"}  # fmt: skip
    assert (
        "data.csv" in rej["so-102"]["reason"] + rej["so-102"]["log"]
    )  # the daemon's own words name the file
    assert [t.id for t in read_manifest(out / "tasks.json")[0]] == ["so-101", "so-105"]
