"""A rollout job resumes only attempts made from the same inputs, and only those of its own grid."""

import json
from types import SimpleNamespace

from horizon.eval.rollout import _Repeat
from horizon.eval.settings import Attempt
from horizon.io import Journal


def record(task: str, attempt: int) -> dict:
    return Attempt(task, attempt, 0, True, 1.0, 1, 10, 5, 1.0, "none", "complete").to_dict()


def repeat(tmp_path, tasks: list[str], attempts: int, made_from) -> _Repeat:
    tasks_ = [SimpleNamespace(id=t) for t in tasks]
    return _Repeat(tasks_, attempts, 0, None, tmp_path / "attempts.jsonl", 0, 0, (), None, made_from)


def journal(tmp_path, made_from, recs) -> None:
    j = Journal(tmp_path / "attempts.partial.jsonl", made_from)
    j.append(recs)
    j.close()


def test_a_narrowed_grid_keeps_only_its_own_attempts(tmp_path):
    inputs = {"model": "m", "seed": 0}
    journal(tmp_path, inputs, [record(t, a) for t in ("t1", "t2") for a in range(4)])
    rep = repeat(tmp_path, ["t1"], 2, inputs)  # the config since narrowed to one task, two attempts
    assert sorted(rep.done) == [("t1", 0), ("t1", 1)] and rep.todo() == []
    rep.finish()
    written = [json.loads(x) for x in (tmp_path / "attempts.jsonl").read_text().splitlines()]
    assert [(r["task"], r["attempt"]) for r in written] == [("t1", 0), ("t1", 1)]


def test_attempts_of_another_model_or_setting_are_run_again(tmp_path):
    journal(tmp_path, {"model": "old", "seed": 0}, [record("t1", 0)])
    assert repeat(tmp_path, ["t1"], 2, {"model": "old", "seed": 0}).done  # positive control: resumed
    rep = repeat(tmp_path, ["t1"], 2, {"model": "retrained", "seed": 0})
    assert rep.done == {} and [a for _, a in rep.todo()] == [0, 1]
    assert (tmp_path / "attempts.partial.jsonl.stale").exists()


def test_what_an_attempt_is_made_from_and_what_a_resumed_job_may_change(tmp_path):
    from dataclasses import replace

    from horizon.eval.rollout import rollout_inputs
    from tests.helpers import eval_settings

    model, tasks, template = tmp_path / "model", tmp_path / "tasks.json", tmp_path / "prompt.yaml"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"w1")
    tasks.write_text("{}")
    template.write_text("t")
    s = eval_settings()

    def inputs(settings=s, seed=0):
        return rollout_inputs(str(model), str(tasks), str(template), settings, seed, [])

    before = inputs()
    # more attempts, more workers, a vLLM flag after an out-of-memory error: the same attempts
    assert inputs(replace(s, attempts=s.attempts + 4, concurrency=8, vllm_args=("--x",))) == before
    assert inputs(replace(s, sampling=replace(s.sampling, temperature=0.123))) != before
    assert inputs(replace(s, context_length=s.context_length // 2)) != before
    assert inputs(seed=1) != before
    (model / "model.safetensors").write_bytes(b"w2")  # retrained
    assert inputs() != before
