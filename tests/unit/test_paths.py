"""Configured paths are checked when the config is validated, each problem naming the key and the value."""

import logging

import pytest

from horizon import config as hc
from horizon.paths import problems
from tests.helpers import CORPUS_SAMPLE, REPO


def cfg(**over):
    raw = {
        "student": {"model": "results/student/tiny", "build": {}},
        "corpus": {"source": str(CORPUS_SAMPLE)},
        "horizons": [64, 256],
        "refine": {"h1": 64, "h2": [256]},
        "eval": {"benchmarks": {"mine": {"format": "harbor", "path": str(REPO / "demo/tasks")}}},
    }
    raw.update(over)
    return hc.validate(raw)


ONLINE = {"HOME": "/nonexistent"}


def offline_env(cache):
    return {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache)}


def test_a_valid_config_has_no_path_problem(tmp_path):
    assert problems(cfg(), tmp_path, ONLINE) == []


def test_a_missing_file_of_the_hub_form_is_a_missing_path_not_a_hub_id(tmp_path):
    found = problems(cfg(corpus={"source": "mydata/corpus.jsonl"}), tmp_path, ONLINE)
    assert [(p.key, p.value) for p in found] == [("corpus.source", "mydata/corpus.jsonl")]
    msg = found[0].message()
    assert str(tmp_path / "mydata/corpus.jsonl") in msg and "working directory of the run" in msg
    assert "a file name" in msg


def test_a_first_folder_that_exists_makes_it_a_local_path(tmp_path):
    (tmp_path / "mydata").mkdir()
    found = problems(cfg(corpus={"source": "mydata/corpus"}), tmp_path, ONLINE)
    assert len(found) == 1 and "its folder mydata/ exists here" in found[0].message()


def test_a_hub_id_passes_online_and_offline_only_when_cached(tmp_path):
    c = cfg(corpus={"source": "someone/corpus"})
    assert problems(c, tmp_path, ONLINE) == []
    cache = tmp_path / "hf"
    found = problems(c, tmp_path, offline_env(cache))
    assert [p.key for p in found] == ["corpus.source"] and "not in the local HF cache" in found[0].message()
    (cache / "datasets--someone--corpus/refs").mkdir(parents=True)
    (cache / "datasets--someone--corpus/refs/main").write_text("abc")
    assert problems(c, tmp_path, offline_env(cache)) == []
    # a corpus the workflow already fetched needs no cache entry
    c2 = cfg(corpus={"source": "someone/other"})
    (tmp_path / "results/corpus/raw").mkdir(parents=True)
    (tmp_path / "results/corpus/raw/manifest.json").write_text("{}")
    assert problems(c2, tmp_path, offline_env(cache)) == []


def test_paths_the_workflow_makes_need_not_exist(tmp_path):
    ev = {"benchmarks": {"mine": {"format": "harbor", "path": str(REPO / "demo/tasks")}},
          "prompt_template": str(REPO / "demo/prompt.yaml")}  # fmt: skip
    c = cfg(corpus={"source": "results/demo-corpus/corpus.jsonl", "collect": {"tasks": "mine"}}, eval=ev)
    assert problems(c, tmp_path, ONLINE) == []  # a collected corpus; a built student


@pytest.mark.parametrize(
    "over, key",
    [
        ({"student": {"model": "./models/mine", "build": None}}, "student.model"),
        ({"eval": {"benchmarks": {"b": {"format": "tb1", "path": "tasks"}}}}, "eval.benchmarks.b.path"),
        ({"eval": {"benchmarks": {"b": {"format": "tb1", "hf": "not a hub id"}}}}, "eval.benchmarks.b.hf"),
        (
            {"judge": {"enabled": True, "endpoint": "http://x", "model": "m", "rubric": "r.yaml"}},
            "judge.rubric",
        ),
        ({"train": {"deepspeed": "ds.json"}}, "train.deepspeed"),
    ],
)
def test_each_path_key_is_named(tmp_path, over, key):
    base = cfg()
    for k, v in over.items():
        base[k] = {**base[k], **v} if isinstance(base.get(k), dict) else v
    found = problems(hc.validate(base), tmp_path, ONLINE)
    assert [p.key for p in found] == [key]


def test_kind_mismatch_and_a_named_template_are_told(tmp_path):
    c = cfg()
    c["eval"]["benchmarks"]["mine"]["path"] = str(CORPUS_SAMPLE)  # a file where a directory is expected
    c["eval"]["prompt_template"] = "terminus-2-harbor"  # a name, not a path
    found = problems(c, tmp_path, ONLINE)
    assert [p.key for p in found] == ["eval.benchmarks.mine.path"] and "expected a directory" in found[0].why


def test_validate_errors_or_warns_naming_every_path(tmp_path, caplog, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    raw = cfg(corpus={"source": "mydata/corpus.jsonl"})
    raw["eval"]["benchmarks"]["mine"]["path"] = "nowhere"
    with pytest.raises(hc.ConfigError) as e:
        hc.validate(raw, paths="error", base=tmp_path)
    assert "corpus.source: 'mydata/corpus.jsonl'" in str(e.value)
    assert "eval.benchmarks.mine.path: 'nowhere'" in str(e.value)
    with caplog.at_level(logging.WARNING, "horizon.config"):
        hc.validate(raw, paths="warn", base=tmp_path)
    assert "corpus.source" in caplog.text and "a run stops before its first job" in caplog.text
    hc.validate(raw)  # skipped by default (scripts and tests outside a run)
