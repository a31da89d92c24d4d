"""`horizon plan`: the arithmetic on a small config, computed by hand; measured figures replace assumptions."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from horizon import config as hc
from horizon.cli import main
from horizon.report.plan import make_plan, plan
from horizon.report.plan_inputs import assumed_lengths, assumed_rates, read_profile
from tests.helpers import REPO

# lengths uniform on [0, 400] tokens: S(x) = 1 - x / 400, so the integrals below are by hand
SMALL = {
    "student": {"model": "m"},
    "corpus": {"source": "c.jsonl"},
    "tokenize": {"shards": 2},
    "horizons": [100, 200],
    "split": {"heldout": 0},
    "refine": {"h1": 100, "h2": [200], "rho": [0.5], "selections": ["top"], "two_stage_full": False},
    "train": {"epochs": 2},
    "score": {"shards": 2, "pool": "longer_than_h1"},
    "eval": {"benchmarks": {"b": {"format": "harbor", "path": "x", "tasks": ["t1", "t2", "t3"]}},
             "attempts": 2, "repeats": 1, "concurrency": 2, "include_base": False},
    "report": {"rel_k": [1, 2]},
    "plan": {"trajectories": 1000, "length_survival": [[0, 1.0], [400, 0.0]], "tokenize_tokens_per_s": 1000,
             "train_tokens_per_gpu_s": 100, "score_tokens_per_gpu_s": 1000, "rollout_seconds_per_attempt": 60},
}  # fmt: skip
PROFILE = {"jobs": 2, "set-resources": {"train_single": {"gres": "gpu:2"}, "score": {"gres": "gpu:1"},
                                        "rollout": {"gres": "gpu:1"}}}  # fmt: skip


@pytest.fixture
def small(tmp_path):
    (tmp_path / "profile").mkdir()
    (tmp_path / "profile" / "config.yaml").write_text(yaml.safe_dump(PROFILE))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(SMALL))
    return hc.validate(SMALL), read_profile(tmp_path / "profile"), tmp_path


def rows_of(cfg, prof, measured=None, lengths=None, rates=None):
    lengths = lengths or assumed_lengths(cfg["plan"])
    rates = rates or assumed_rates(cfg["plan"], cfg["eval"]["benchmarks"])
    return {r.stage: r for r in plan(cfg, prof, lengths, rates, measured)}


def test_plan_arithmetic_on_a_small_config(small):
    cfg, prof, _ = small
    assert (prof.train_world, prof.score_gpus, prof.rollout_gpus, prof.jobs) == (2, 1, 1, 2)
    r = rows_of(cfg, prof)
    # corpus: 1000 x integral of S over [0, 400] = 200,000 tokens; 2 jobs at 1,000 tok/s: 100 s
    assert r["tokenize"].amount == pytest.approx(200_000) and r["tokenize"].wall_hours == pytest.approx(
        100 / 3600
    )
    # K=100: 2 epochs x 1000 x (100 - 100^2/800) = 175,000 tokens; 1,750 GPU-s on 2 GPUs
    k100 = r["train single-K100"]
    assert k100.amount == pytest.approx(175_000)
    assert k100.gpu_hours == pytest.approx(1750 / 3600) and k100.wall_hours == pytest.approx(875 / 3600)
    assert r["train single-K200"].amount == pytest.approx(2 * 1000 * 150)  # 200 - 200^2/800 = 150
    # pool (longer than H1 = 100): 750 trajectories, 1000 x (100 x 0.75 + 62.5) = 137,500 tokens up to H2
    score = r["score H100-200"]
    assert score.amount == pytest.approx(137_500) and score.gpu_hours == pytest.approx(137.5 / 3600)
    assert score.wall_hours == pytest.approx(137.5 / 2 / 3600)  # 2 shards at once
    # top 50%: ceil(375) x the pool's mean 183.3 tokens x 2 epochs = 137,500 tokens
    assert r["train refine-H200-top-50"].amount == pytest.approx(137_500)
    # diagnostics: (2 single-stage + 3 sets under theta1) x 64 trajectories x mean length 300 of those >= 200
    assert r["diagnostics"].amount == pytest.approx(5 * 64 * 300)
    # rollouts: 3 models x 1 repeat = 3 jobs of 3 tasks x 2 attempts x 60 s / 2 at once = 180 s each
    ro = r["rollouts b"]
    assert ro.amount == 18 and ro.gpu_hours == pytest.approx(3 * 180 / 3600)
    assert ro.wall_hours == pytest.approx(2 * 180 / 3600)  # 2 jobs at once (profile jobs: 2): two waves
    total = (1750 + 3000 + 137.5 + 1375 + 5 * 64 * 300 / 1000) / 3600 + 3 * 180 / 3600
    assert sum(x.gpu_hours for x in r.values()) == pytest.approx(total)


def test_dmpo_adds_its_preference_rollouts_and_its_run(small):
    import copy

    cfg, prof, _ = small
    raw = copy.deepcopy(SMALL)
    raw["dmpo"] = {"enabled": True, "policy": "single-K200", "tasks": {"format": "harbor", "path": "t"},
                   "attempts": 4, "rollout_shards": 2, "pairs_per_task": 2, "epochs": 1}  # fmt: skip
    raw["plan"]["benchmark_tasks"] = {"dmpo": 5}
    r = rows_of(hc.validate(raw), prof)
    pref = r["rollouts dmpo-single-K200 preference"]
    # 5 tasks x 4 attempts x 60 s over 2 at once per job, 2 jobs on 1 GPU each: 600 s of GPU time in all
    assert pref.amount == 20 and pref.gpu_hours == pytest.approx(600 / 3600)
    assert pref.wall_hours == pytest.approx(300 / 3600)
    # 1 epoch x 5 tasks x 2 pairs x 2 trajectories x the corpus's mean length (200): 4,000 tokens
    assert r["train dmpo-single-K200"].amount == pytest.approx(4000)
    assert r["rollouts b"].amount == 4 * 3 * 2  # the DMPO model is evaluated like the others


def test_printed_plan_ends_with_the_total_and_prints_its_assumptions(small, capsys):
    cfg, _, tmp = small
    assert main(["plan", "--configfile", str(tmp / "config.yaml"), "--profile", str(tmp / "profile")]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    total = (1750 + 3000 + 137.5 + 1375 + 96) / 3600 + 0.15
    assert out[-1] == f"total: {total:,.1f} GPU-hours"
    text = "\n".join(out)
    assert "100 tokens/s per GPU, assumed (config plan.train_tokens_per_gpu_s)" in text
    assert "pool H100-200  750 trajectories (longer_than_h1)" in text
    # critical path: tokenize 100 s + theta1 875 s + scoring 68.75 s + refinement 687.5 s + rollouts 360 s
    assert f"every job of a stage at once): {(100 + 875 + 68.75 + 687.5 + 360) / 60:.1f} min" in text


def test_per_h2_pool_and_a_benchmark_without_a_task_count(small):
    cfg, prof, _ = small
    per_h2 = hc.validate({**SMALL, "score": {"shards": 2, "pool": "per_h2"}})
    # at least 200 tokens: 500 trajectories, each 200 tokens up to H2
    assert rows_of(per_h2, prof)["score H100-200"].amount == pytest.approx(500 * 200)
    unknown = hc.validate(
        {**SMALL, "eval": {**SMALL["eval"], "benchmarks": {"b": {"format": "tb1", "path": "x"}}}}
    )
    with pytest.raises(KeyError, match="plan.benchmark_tasks.b"):
        rows_of(unknown, prof)


def test_from_results_uses_what_finished_jobs_measured(small):
    cfg, prof, tmp = small
    res = tmp / "results"
    (res / "tokens").mkdir(parents=True)
    lengths = [50, 150, 250, 350]  # two shards
    for i, part in enumerate((lengths[:2], lengths[2:])):
        pq.write_table(
            pa.table({"n_tokens": pa.array(part, pa.int32())}), res / "tokens" / f"shard-{i:03d}.parquet"
        )
    done = res / "models" / "single-K100"
    done.mkdir(parents=True)
    (done / "timing.json").write_text(json.dumps({"wall_hours": 0.5, "wall_seconds": 1800, "world_size": 2,
                                                  "tokens_seen": 36_000, "device": "NVIDIA H100"}))  # fmt: skip
    run = res / "rollouts" / "single-K100" / "b" / "r0"
    run.mkdir(parents=True)
    (run / "attempts.partial.jsonl").write_text("".join(json.dumps({"seconds": s, "failure_mode": m}) + "\n"
                                                for s, m in ((30, "none"), (90, "tests_failed"), (999, "infra_error"))))  # fmt: skip
    text = make_plan(cfg, tmp / "profile", res, title="small")
    assert "4 trajectories, measured (2 token shards)" in text
    assert "10 tokens/s per process, measured (1 timing.json on NVIDIA H100)" in text  # 36,000 / (1,800 x 2)
    assert (
        "60 s per attempt, measured (2 attempts)" in text
    )  # the infrastructure error is not an attempt's time
    line = next(x for x in text.splitlines() if x.startswith("train single-K100"))
    assert line.endswith("(done)") and " 1.0 " in line  # 0.5 h on 2 GPUs
    # K=200 from the measured lengths: 2 x (50 + 150 + 200 + 200) tokens at 10 tok/s/GPU
    line = next(x for x in text.splitlines() if x.startswith("train single-K200"))
    assert "1.2e+03" in line and f"{1200 / 10 / 3600:,.1f}" in line


def test_the_paper_grid_plans_at_the_profile_gpu_counts(monkeypatch):
    monkeypatch.setenv("HORIZON_GPUS_PER_NODE", "4")
    text = make_plan(hc.load(REPO / "config.yaml"), REPO / "slurm", title="config.yaml")
    assert "training 4 GPUs x 1 node(s)" in text and text.splitlines()[-1].startswith("total: ")
    rows = [x for x in text.splitlines() if x.startswith(("train ", "score ", "rollouts "))]
    assert (
        len(rows) == 4 + 20 + 2 + 3
    )  # single-stage, refinements, scoring per H2, rollouts per benchmark (3)
    assert np.isfinite(float(text.splitlines()[-1].split()[1].replace(",", "")))
