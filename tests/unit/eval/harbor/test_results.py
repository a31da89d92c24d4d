"""The harbor_engine converter on result files a real Harbor job wrote here (tests/fixtures/harbor-results,
recorded by its record.py): every outcome maps to our attempt contract, and the records pass the checks
the tables make of ours."""

import json
import shutil
from pathlib import Path

import pytest

from horizon.eval.harbor.results import HarborResultError, convert_job, drop_interrupted, read_episodes
from horizon.eval.settings import Attempt
from horizon.report.metrics import build_cell
from tests.helpers import FIXTURES, HARBOR_RUN_TASKS

RESULTS = FIXTURES / "harbor-results"
TASKS = {str(p): p.name for p in [*(RESULTS / "tasks").iterdir(), *HARBOR_RUN_TASKS.iterdir()]}


def converted(job=RESULTS / "job", signatures=("No such file",)):
    return convert_job(
        job, TASKS, attempts=1, repeat=2, signatures=list(signatures), max_turns=None, retries=2
    )


def by_task(conv) -> dict[str, dict]:
    return {r.task: r.to_dict() for r in conv.records}


def test_harbor_engine_outcomes_map_to_failure_modes():
    recs = by_task(converted())
    got = {t: (r["success"], r["failure_mode"], r["ended"]) for t, r in recs.items()}
    assert got == {
        "greet": (True, "none", "completed"),
        "count-words": (False, "tests_failed", "completed"),
        "multi-reward": (True, "none", "completed"),  # {"reward": 1.0, "style": 0.5}: the key reward
        "verifier-timeout": (False, "test_timeout", "completed"),
        "no-reward": (False, "tests_failed", "completed"),  # RewardFileNotFoundError: the grader's verdict
        "agent-timeout": (False, "agent_timeout", "agent_timeout"),  # graded all the same: reward 0
        "build-fail": (False, "infra_error", "infra_error"),
    }
    assert all(r["harness"] == "harbor" and r["repeat"] == 2 and r["attempt"] == 0 for r in recs.values())


def test_harbor_engine_failed_environment_is_infra_error_with_evidence():
    r = by_task(converted())["build-fail"]
    assert r["error"].startswith(
        "harbor RuntimeError: Docker compose command failed for environment build-fail"
    )
    assert r["error"].endswith("exception.txt)") and Path(r["error"].rsplit("(", 1)[1][:-1]).exists()
    assert (
        r["infra_tries"] == 3
    )  # Harbor retries such errors (retry.max_retries = eval.max_infra_retries = 2)
    assert (r["episodes"], r["reward"], r["seconds"]) == (0, 0.0, 0.0)


def test_harbor_engine_verifier_timeout_and_missing_reward_keep_harbors_message():
    recs = by_task(converted())
    assert recs["verifier-timeout"]["error"].startswith(
        "harbor VerifierTimeoutError: Verifier execution timed out"
    )
    assert "RewardFileNotFoundError" in recs["no-reward"]["error"]
    assert "error" not in recs["greet"] and "error" not in recs["count-words"]


def test_harbor_engine_episodes_parse_errors_signatures_tokens_timing():
    recs = by_task(converted())
    g = recs["greet"]  # an unparseable answer, the fix, task_complete twice
    assert (g["episodes"], g["parse_errors"], g["first_complete_episode"], g["model_calls"]) == (4, 1, 2, 4)
    assert g["prompt_tokens"] > 0 and g["completion_tokens"] > 0
    assert set(g["timing"]) == {"start", "agent", "grade", "teardown"}
    assert g["seconds"] == pytest.approx(sum(g["timing"].values()), abs=0.01)
    # `cat /app/missing.txt` printed "No such file" after episode 0, before the first task_complete
    assert recs["no-reward"]["error_signatures"] == [{"pattern": "No such file", "episode": 0}]
    assert recs["agent-timeout"]["episodes"] == 1 and recs["agent-timeout"]["first_complete_episode"] is None


def test_harbor_engine_records_pass_the_checks_of_ours(tmp_path):
    conv = converted()
    assert conv.missing == [] and conv.skipped == []
    lines = [json.dumps(r.to_dict()) for r in conv.records]
    assert [Attempt.from_dict(json.loads(x)) for x in lines] == conv.records  # the contract round-trips
    f = tmp_path / "attempts.jsonl"
    f.write_text("\n".join(lines) + "\n")
    cell = build_cell("m", "b", {0: f}, sorted(TASKS.values()), 1, 1, [1])
    assert cell.infra_errors == 1 and cell.stat("success_attempts")[0] == 2  # greet, multi-reward
    assert cell.repeats[0].n["build-fail"] == 0  # excluded, not scored as a failure


def test_harbor_engine_transcripts_hold_the_raw_answers():
    t = converted().transcripts[("greet", 0)]
    roles = [m["role"] for m in t["messages"]]
    assert roles[:3] == ["user", "assistant", "user"] and roles.count("assistant") == 4
    assert t["messages"][1]["content"].startswith("<think>\nr\n</think>")  # reasoning put back in its tags
    assert "{not json" in t["messages"][1]["content"] and Path(t["harbor_trial"]).name.startswith("greet__")


def test_harbor_engine_cancelled_or_unfinished_trials_are_no_attempts(tmp_path):
    conv = convert_job(RESULTS / "cancelled", {"x/agent-timeout": "agent-timeout"}, 1, 0)
    assert conv.records == [] and conv.missing == [("agent-timeout", 0)] and len(conv.skipped) == 1
    job = shutil.copytree(RESULTS / "job", tmp_path / "job")
    greet = next(job.glob("greet__*"))
    (greet / "result.json").unlink()  # killed mid-trial: Harbor's resume reruns it
    conv = convert_job(job, TASKS, 1, 0)
    assert ("greet", 0) in conv.missing and greet.name in conv.skipped


def test_harbor_engine_bad_result_file_is_named(tmp_path):
    job = shutil.copytree(RESULTS / "job", tmp_path / "job")
    bad = next(job.glob("greet__*")) / "result.json"
    bad.write_text("{not json")
    with pytest.raises(HarborResultError, match=f"{bad}: cannot be read as JSON"):
        convert_job(job, TASKS, 1, 0)
    other = {"elsewhere/unknown": "unknown"}
    with pytest.raises(HarborResultError, match="is not one of this job's"):
        convert_job(RESULTS / "job", other, 1, 0)


def test_harbor_engine_trajectory_without_raw_answers_uses_harbors_tool_calls():
    step = lambda calls, obs="out": {"source": "agent", "message": "Analysis: a", "tool_calls": calls,  # noqa: E731
                                     "observation": {"results": [{"content": obs}]}}  # fmt: skip
    done = [{"function_name": "mark_task_complete"}]
    traj = {"steps": [{"source": "user", "message": "task"}, step([{"function_name": "bash_command"}]),
                      step(None, "Previous response had parsing errors"), step(done), step(done)]}  # fmt: skip
    ep = read_episodes(traj, [])
    assert (ep.count, ep.parse_errors, ep.first_complete, ep.completed) == (4, 1, 2, True)


def test_harbor_engine_interrupted_trial_is_dropped_before_the_resume(tmp_path):
    # what Harbor writes for a trial its SIGTERM handler's KeyboardInterrupt hit mid-step: a result
    # with neither a reward nor an exception (seen here; Harbor's resume would keep it as finished)
    job = shutil.copytree(RESULTS / "job", tmp_path / "job")
    trial = next(job.glob("count-words__*"))
    res = json.loads((trial / "result.json").read_text())
    res.update(
        verifier_result=None, exception_info=None, agent_setup=None, agent_execution=None, verifier=None
    )
    (trial / "result.json").write_text(json.dumps(res))
    conv = convert_job(job, TASKS, 1, 0)
    assert ("count-words", 0) in conv.missing and trial.name in conv.skipped
    assert drop_interrupted(job) == [trial.name] and not trial.exists()
    assert drop_interrupted(job) == []  # the others are finished trials (or Harbor's own cancelled ones)
