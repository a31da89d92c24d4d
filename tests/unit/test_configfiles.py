"""Several config files: a later corpus, student, benchmark set or DMPO task set replaces the earlier one."""

import yaml

from horizon import config as hc
from horizon.configfiles import combine, combine_dicts
from tests.helpers import CORPUS_SAMPLE, REPO

DEMO = yaml.safe_load((REPO / "demo/config.yaml").read_text())


def test_a_later_source_replaces_the_earlier_sources_and_benchmarks_are_replaced_as_a_set():
    mine = {
        "corpus": {"source": str(CORPUS_SAMPLE)},
        "eval": {"benchmarks": {"mine": {"format": "harbor", "path": "tasks"}}, "attempts": 3},
    }
    out = combine_dicts([("demo/config.yaml", DEMO), ("mine.yaml", mine)])
    assert out.config["corpus"] == {"source": str(CORPUS_SAMPLE)}
    assert list(out.config["eval"]["benchmarks"]) == ["mine"]
    assert out.config["eval"]["attempts"] == 3 and out.config["eval"]["repeats"] == 2  # other keys merge
    assert out.config["train"] == DEMO["train"]
    assert len(out.notes) == 2
    assert (
        "mine.yaml replaces the earlier `corpus` section" in out.notes[0] and "corpus.source" in out.notes[0]
    )
    assert "sources" in out.notes[0] and "common_tasks" in out.notes[0]  # what was dropped
    assert "`eval.benchmarks`" in out.notes[1] and "dropped: demo" in out.notes[1]


def test_a_later_student_model_drops_the_build_block_and_settings_merge():
    out = combine_dicts(
        [("a", DEMO), ("b", {"student": {"model": "Qwen/Qwen3-0.6B"}, "train": {"epochs": 1}})]
    )
    assert out.config["student"] == {"model": "Qwen/Qwen3-0.6B"}
    assert out.config["train"]["epochs"] == 1 and out.config["train"]["lr"] == DEMO["train"]["lr"]
    # a later file that only tunes a section merges into it, as Snakemake does
    tuned = combine_dicts([("a", DEMO), ("b", {"corpus": {"per_task": "shortest"}})])
    assert tuned.config["corpus"]["sources"] == DEMO["corpus"]["sources"] and tuned.notes == []


def test_overrides_come_last_and_files_are_read_like_snakemake(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump({"dmpo": {"tasks": {"format": "harbor", "hf": "someone/tasks"}}}))
    out = combine([REPO / "demo/config.yaml", mine], {"seed": 3})
    assert out.config["dmpo"]["tasks"] == {"format": "harbor", "hf": "someone/tasks"}
    assert out.config["seed"] == 3


def test_the_demo_and_a_small_own_config_validate_combined():
    mine = {
        "corpus": {"source": str(CORPUS_SAMPLE)},
        "eval": {"benchmarks": {"mine": {"format": "harbor", "path": str(REPO / "demo/tasks")}}},
    }
    cfg = hc.validate(combine_dicts([("demo", DEMO), ("mine", mine)]).config)
    assert cfg["corpus"]["source"] == str(CORPUS_SAMPLE) and not cfg["corpus"].get("sources")
