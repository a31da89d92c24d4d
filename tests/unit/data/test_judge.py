"""The LLM-judge filter against a SCRIPTED OpenAI-compatible server (tests/doubles/scripted_judge.py,
a fake: no model behind it) started by the test: verdicts, malformed answers, rate limits, a judge
that refuses, an endpoint that refuses, and a server that dies mid-run (resume)."""

import json

import pyarrow.parquet as pq
import pytest

from horizon.data.judge import JudgeError, JudgeSettings, Malformed, Rubric, parse_verdict, run_judge
from horizon.io import Journal
from tests.doubles.judge import corpus, scripted_server
from tests.helpers import REPO, judge_settings

RUBRIC = REPO / "workflow" / "judge" / "rubric.yaml"


def settings(url, **kw) -> JudgeSettings:
    return judge_settings(**{"endpoint": url, "model": "scripted", "keep": 3.0, "concurrency": 4,
                             "max_retries": 2, "timeout_s": 10, **kw})  # fmt: skip


def judged(tmp_path) -> dict[str, dict]:
    return {r["traj_id"]: r for r in pq.read_table(tmp_path / "judge.parquet").to_pylist()}


def test_rubric_without_a_scale_is_a_named_error(tmp_path):
    bad = tmp_path / "rubric.yaml"
    bad.write_text("criteria: {groundedness: uses what it saw}\n")
    with pytest.raises(JudgeError, match=f"judge rubric {bad}: no score scale"):
        Rubric.load(bad)
    bad.write_text("scale: {min: 1, max: 5}\n")
    with pytest.raises(JudgeError, match="`criteria` must map"):
        Rubric.load(bad)
    with pytest.raises(JudgeError, match=r"judge.keep: 7 is outside the scale 1..5"):
        run_judge(corpus(tmp_path, {"a": "x"}), RUBRIC, tmp_path / "j.parquet", tmp_path / "j.json",
                  settings("http://127.0.0.1:9", keep=7))  # fmt: skip


def test_verdicts_are_parsed_strictly():
    r = Rubric.load(RUBRIC)
    ok = json.dumps({"scores": {c: 3 for c in r.criteria}, "refusal": False})
    assert parse_verdict(f"<think>x</think>\n{ok}", r) == ({c: 3 for c in r.criteria}, False)
    for answer, kind in [
        ("no json here", "malformed"),
        ("I'm sorry, but I can't help with that.", "judge_refused"),
        (json.dumps({"scores": {c: 9 for c in r.criteria}}), "malformed"),
        (json.dumps({"scores": {c: True for c in r.criteria}}), "malformed"),
        (json.dumps({"scores": {c: 3 for c in r.criteria}, "refusal": "no"}), "malformed"),
    ]:
        with pytest.raises(Malformed) as e:
            parse_verdict(answer, r)
        assert e.value.kind == kind


TEXTS = {
    "good": "QUALITY=5 solid work",
    "weak": "QUALITY=2 sloppy",
    "refuses": "QUALITY=5 AGENT-REFUSES",
    "once": "QUALITY=4 MALFORMED-ONCE",
    "always": "MALFORMED-ALWAYS",
    "judge_no": "JUDGE-REFUSES",
}


def test_scripted_judge_verdicts_malformed_answers_and_rate_limits(tmp_path):
    log = tmp_path / "server.jsonl"
    with scripted_server("--rate-limit-first", 3, log=log) as (url, _):
        stats = run_judge(corpus(tmp_path, TEXTS), RUBRIC, tmp_path / "judge.parquet", tmp_path / "judge.json",
                          settings(url, max_retries=4))  # fmt: skip
    rows = judged(tmp_path)
    assert {t: (r["status"], r["reason"]) for t, r in rows.items()} == {
        "good": ("judged", None),
        "weak": ("judged", "judge_below_threshold"),
        "refuses": ("judged", "refusal"),
        "once": ("judged", None),
        "always": ("malformed", "unjudged_malformed"),
        "judge_no": ("judge_refused", "unjudged_judge_refused"),
    }
    assert rows["good"]["score"] == 5 and rows["weak"]["score"] == 2
    once = json.loads(rows["once"]["answers"])  # every raw answer is stored, the broken one too
    assert len(once) == 2 and once[0].startswith("Scores: adaptability four")
    assert rows["always"]["attempts"] == 3 and "is not an integer in 1..5" in rows["always"]["detail"]
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    # three refusals (logged as the concurrent requests end, in any order), retried by the client, none lost
    assert sum(r["status"] == 429 for r in requests) == 3
    assert sum(r["status"] == 200 for r in requests) == stats["answers"] == 1 + 1 + 1 + 2 + 3 + 3
    assert stats["kept"] == 2 and stats["removed"] == {"judge_below_threshold": 1, "refusal": 1,
                                                       "unjudged_malformed": 1, "unjudged_judge_refused": 1}  # fmt: skip


def test_an_endpoint_that_refuses_stops_the_stage_naming_it(tmp_path):
    with scripted_server("--status", 403) as (url, _):
        with pytest.raises(JudgeError, match=r"refused the request \(403\)"):
            run_judge(corpus(tmp_path, TEXTS), RUBRIC, tmp_path / "judge.parquet", tmp_path / "judge.json",
                      settings(url))  # fmt: skip
    assert not (tmp_path / "judge.parquet").exists()


def test_a_server_that_dies_mid_run_resumes_without_losing_or_repeating_work(tmp_path):
    texts = {f"t{i:02d}": f"QUALITY={1 + i % 5} trajectory {i}" for i in range(30)}
    traj = corpus(tmp_path, texts)
    args = (traj, RUBRIC, tmp_path / "judge.parquet", tmp_path / "judge.json")
    with scripted_server("--die-after", 12) as (url, proc):
        with pytest.raises(
            JudgeError, match=r"APIConnectionError .* of 30 trajectories judged, kept in .*rerun to resume"
        ):
            run_judge(*args, settings(url, concurrency=3, max_retries=1))
        assert proc.wait(timeout=30) == 3  # the server really died (its exit may lag the client's error)
    first = {r["traj_id"]: r for r in Journal(tmp_path / "judge.partial.jsonl").read()}
    assert 0 < len(first) <= 12 and not (tmp_path / "judge.parquet").exists()
    log = tmp_path / "second.jsonl"
    with scripted_server(log=log) as (url, _):
        run_judge(*args, settings(url, concurrency=3))
    rows = judged(tmp_path)
    assert sorted(rows) == sorted(texts)  # every trajectory once
    asked_again = len(log.read_text().splitlines())
    assert asked_again == 30 - len(first)  # nothing judged before was asked again
    records = Journal(tmp_path / "judge.partial.jsonl").read()
    assert len(records) == 30 and len({r["traj_id"] for r in records}) == 30
    for t, rec in first.items():  # the first run's verdicts and raw answers are the final ones
        assert json.loads(rows[t]["answers"]) == rec["answers"] and rows[t]["score"] == rec["score"]
    assert all(rows[t]["score"] == 1 + int(t[1:]) % 5 for t in rows)
