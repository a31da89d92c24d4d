"""DMPO training runs on CPU: the SFT launcher, its records with the rewards, ZeRO-3 on 2 processes, resume."""

import json

import pytest

from horizon.dmpo.launch import DMPOSpec, train_dmpo
from horizon.dmpo.pairs import build_pairs
from horizon.dmpo.ref_logprobs import compute_reference
from tests.e2e.test_training import kill_after_first_checkpoint, train_cfg
from tests.unit.dmpo.attempts import write_attempts

pytestmark = pytest.mark.slow


@pytest.fixture()
def pair_data(tmp_path, tiny_corpus):
    rollouts = tmp_path / "rollouts"
    rollouts.mkdir()
    f = write_attempts(rollouts, {"a": [True, False, True, False], "b": [True, True]})  # 4 pairs, all from a
    pairs = tmp_path / "pairs.parquet"
    build_pairs([f], str(tiny_corpus / "student"), str(pairs), str(tmp_path / "pairs.json"),
                policy="base", task_set="t", pairs_per_task=4, seed=0)  # fmt: skip
    compute_reference(pairs, tiny_corpus / "student", tmp_path / "reference.parquet")
    return tmp_path


def global_batch(train: dict) -> int:
    """Pairs per optimizer step: every process's batch, no accumulation."""
    return train.get("per_device_batch", 2) * train.get("cpu_processes", 1)


def spec_for(tiny_corpus, data, name, **train) -> DMPOSpec:
    return DMPOSpec(
        name=name,
        model_init=str(tiny_corpus / "student"),
        tokenizer=str(tiny_corpus / "student"),
        pairs=str(data / "pairs.parquet"),
        reference=str(data / "reference.parquet"),
        output=str(data / "models" / name),
        checkpoints=str(data / "checkpoints" / name),
        train=train_cfg(
            **{"lr": 3e-3, "epochs": 6, "per_device_batch": 2, **train, "global_batch": global_batch(train)}
        ),
        seed=0,
        beta=0.1,
        gamma=0.7,
        chunk=7,
        extra_timing={"policy": "base", "preference_hours": 0.01},
    )


def log_lines(model_dir):
    return [json.loads(x) for x in (model_dir / "train_log.jsonl").read_text().splitlines()]


def test_dmpo_learns_to_prefer_the_successes_and_records_its_rewards(tiny_corpus, pair_data):
    spec = spec_for(tiny_corpus, pair_data, "dmpo-base")
    train_dmpo(spec, threads=2)
    out = pair_data / "models" / "dmpo-base"
    log = log_lines(out)
    assert len(log) == 12  # 4 pairs / batch 2 = 2 steps per epoch, 6 epochs, logged every step
    for rec in log:
        assert {
            "loss",
            "lr",
            "grad_norm",
            "reward_chosen",
            "reward_rejected",
            "reward_margin",
            "reward_accuracy",
        } <= set(rec)
    assert abs(log[0]["reward_margin"]) < 1e-3 and log[0]["loss"] == pytest.approx(
        0.6931, abs=1e-3
    )  # theta = ref
    assert log[-1]["reward_margin"] > 0.5 and log[-1]["reward_accuracy"] == 1.0 and log[-1]["loss"] < 0.5
    assert log[-1]["reward_chosen"] - log[-1]["reward_rejected"] == pytest.approx(log[-1]["reward_margin"])
    timing = json.loads((out / "timing.json").read_text())
    assert timing["preference_hours"] == 0.01 and timing["policy"] == "base" and timing["horizon"] is None
    assert json.loads((out / "examples.json").read_text())["pairs"] == 4
    args = json.loads((out / "training_args.json").read_text())
    assert args["learning_rate"] == 3e-3 and args["num_train_epochs"] == 6


def test_dmpo_refuses_reference_logprobs_of_another_model(tiny_corpus, pair_data):
    import shutil

    import torch
    from transformers import AutoModelForCausalLM

    other = pair_data / "other"
    shutil.copytree(tiny_corpus / "student", other)
    m = AutoModelForCausalLM.from_pretrained(other)
    with torch.no_grad():
        next(m.parameters()).mul_(1.5)
    m.save_pretrained(other)
    spec = spec_for(tiny_corpus, pair_data, "dmpo-other")
    spec.model_init = str(other)
    with pytest.raises(ValueError, match="reference log-probs of another model"):
        train_dmpo(spec)
    assert not (pair_data / "checkpoints" / "dmpo-other").exists()  # refused before anything ran


DMPO_JOB = (
    "from horizon.dmpo.launch import DMPOSpec, train_dmpo; train_dmpo(DMPOSpec.load({path!r}), threads=2)"
)


def test_dmpo_with_deepspeed_zero3_on_two_processes_resumes_after_sigkill(tiny_corpus, pair_data):
    zero3 = dict(deepspeed="zero3", cpu_processes=2, epochs=4, save_steps=2, per_device_batch=1)
    spec = spec_for(tiny_corpus, pair_data, "dmpo-ds", **zero3)
    train_dmpo(spec, threads=2)
    out = pair_data / "models" / "dmpo-ds"
    log = log_lines(out)
    assert len(log) == 8  # 4 pairs / (2 ranks x 1 pair) = 2 steps per epoch
    assert log[-1]["reward_margin"] > log[0]["reward_margin"] + 0.1
    timing = json.loads((out / "timing.json").read_text())
    assert timing["world_size"] == 2
    assert (
        json.loads((out / "training_args.json").read_text())["deepspeed_config"]["zero_optimization"]["stage"]
        == 3
    )
    killed = spec_for(tiny_corpus, pair_data, "dmpo-ds-killed", **zero3)
    kill_after_first_checkpoint(killed, pair_data, DMPO_JOB)
    train_dmpo(killed, threads=2)
    resumed = pair_data / "models" / "dmpo-ds-killed"
    assert json.loads((resumed / "timing.json").read_text())["segments"] == 2
    assert [r["loss"] for r in log_lines(resumed)] == pytest.approx([r["loss"] for r in log], rel=1e-4)
    assert [r["reward_margin"] for r in log_lines(resumed)] == pytest.approx(
        [r["reward_margin"] for r in log], rel=1e-3
    )
