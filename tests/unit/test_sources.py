"""Several teachers' corpora (names, config), the filters between normalize and tokenize, selection by
TOR, observation masking and the blind teacher."""

import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from horizon import config as hc
from horizon.data.filters import FilterError, build_training_corpus
from horizon.data.normalize import TRAJECTORY_SCHEMA
from horizon.data.quality import QUALITY_SCHEMA
from horizon.data.tokens import drop_observations, observation_forms
from horizon.grid import Grid, ModelName, wildcard_pattern
from horizon.score.select import keep_count, select, select_by_tor
from tests.helpers import REPO, deep_update


def raw_demo() -> dict:
    """The demo's config: two scripted teachers (careful, the study's corpus, and blind)."""
    import yaml

    return yaml.safe_load((REPO / "demo" / "config.yaml").read_text())


def one_source() -> dict:
    raw = raw_demo()
    study = raw["corpus"]["sources"]["careful"]
    raw["corpus"] = {"source": study["source"], "collect": study["collect"]}
    return raw


def two_sources(**corpus) -> dict:
    raw = raw_demo()
    raw["corpus"] = {"sources": raw["corpus"]["sources"], **corpus}
    return raw


# ---------------------------------------------------------------------------------------------
# names and config


def test_other_teachers_models_are_named_with_their_source():
    assert str(ModelName.parse("single-K640@blind")) == "single-K640@blind"
    m = ModelName.parse("single-K640@blind")
    assert (m.source, m.label, m.group) == (
        "blind",
        "single-stage K=640 (blind)",
        "single-stage, teacher blind",
    )
    assert ModelName.parse("refine-H640-tor-top-50").label == "two-stage H2=640 TOR-top 50%"
    import re

    pattern = re.compile(f"^{wildcard_pattern()}$")
    assert all(pattern.match(n) for n in ("single-K640@blind", "refine-H640-tor-bottom-33.3", "single-K8"))
    assert not pattern.match("refine-H640-top-50@blind")  # only single-stage models carry a source
    with pytest.raises(ValueError, match="not a model name"):
        ModelName.parse("single-K640@")


def test_two_sources_keep_the_study_names_and_add_the_teachers_models():
    one = Grid.from_config(hc.validate(one_source()))
    two = Grid.from_config(hc.validate(two_sources(source_horizons=[640])))
    added = [n for n in two.model_names if n not in one.model_names]
    assert added == ["single-K640@blind"] and set(one.model_names) <= set(two.model_names)
    assert (two.primary, two.compared, two.source_horizons) == ("careful", ("blind",), (640,))
    assert two.data_root("results", "careful") == "results" == one.data_root("results")
    assert two.data_root("results", "blind") == "results/sources/blind"
    assert two.source_of_root("results", "results/sources/blind") == "blind"
    every = Grid.from_config(hc.validate(two_sources()))  # source_horizons null: every horizon
    assert [n for n in every.model_names if "@" in n] == [
        "single-K192@blind",
        "single-K384@blind",
        "single-K640@blind",
    ]


@pytest.mark.parametrize(
    "corpus, message",
    [
        ({"common_tasks": True}, "corpus.common_tasks: needs at least two"),
        ({"source_horizons": [640]}, "corpus.source_horizons: needs at least two"),
    ],
)
def test_keys_that_need_several_sources(corpus, message):
    with pytest.raises(hc.ConfigError, match=message):
        hc.validate(deep_update(one_source(), {"corpus": corpus}))


def test_bad_source_settings_fail_naming_the_key():
    raw = two_sources()
    raw["corpus"]["source"] = "x.jsonl"
    with pytest.raises(hc.ConfigError, match="exactly one of `source`"):
        hc.validate(raw)
    with pytest.raises(hc.ConfigError, match=r"corpus.source_horizons\[0\]: 999 is not one of horizons"):
        hc.validate(two_sources(source_horizons=[999]))
    bad = two_sources()
    bad["corpus"]["sources"]["blind"]["collect"]["tasks"] = "nope"
    with pytest.raises(hc.ConfigError, match="corpus.sources.blind.collect.tasks: 'nope' is not a benchmark"):
        hc.validate(bad)
    with pytest.raises(hc.ConfigError, match="corpus.sources"):
        hc.validate(deep_update(two_sources(), {"corpus": {"sources": {"bad name": {"source": "x"}}}}))


# ---------------------------------------------------------------------------------------------
# the training corpus


def corpus_files(tmp_path, name, rows):
    """rows: (traj_id, task, n_steps, chars)."""
    traj = [{"traj_id": t, "task": task, "source": "f", "source_row": i,
             "conversations": [{"role": "user", "content": "x"}], "n_turns": 1}
            for i, (t, task, _, _) in enumerate(rows)]  # fmt: skip
    qual = [{"traj_id": t, "task": task, "n_steps": s, "chars": c, "tor": 0.5} for t, task, s, c in rows]
    d = tmp_path / name
    d.mkdir()
    pq.write_table(pa.Table.from_pylist(traj, schema=TRAJECTORY_SCHEMA), d / "trajectories.parquet")
    pq.write_table(pa.Table.from_pylist(qual, schema=QUALITY_SCHEMA), d / "quality.parquet")
    return d


ROWS_A = [("a1", "t1", 4, 900), ("a2", "t1", 3, 950), ("a3", "t1", 3, 800), ("a4", "t2", 6, 10), ("a5", None, 2, 5),
          ("a6", "t3", 5, 100)]  # fmt: skip
ROWS_B = [("b1", "t1", 2, 10), ("b2", "t2", 2, 10), ("b3", "t4", 2, 10)]


def kept(d):
    return pq.read_table(d / "train" / "trajectories.parquet").column("traj_id").to_pylist()


def test_per_task_keeps_the_shortest_or_longest_success(tmp_path):
    a = corpus_files(tmp_path, "a", ROWS_A)
    stats = build_training_corpus(
        "a", a / "trajectories.parquet", a / "quality.parquet", a / "train", per_task="shortest"
    )
    # t1: a2 and a3 have 3 turns, a3 has fewer characters; a5 has no task id: kept, counted
    assert kept(a) == ["a3", "a4", "a5", "a6"]
    assert stats["removed"] == {"per_task_shortest": 2} and stats["without_task_id"] == 1
    assert stats["rows"] == stats["kept"] + sum(stats["removed"].values())
    removed = pq.read_table(a / "train" / "removed.parquet").to_pylist()
    assert {r["traj_id"] for r in removed} == {"a1", "a2"} and removed[0]["reason"] == "per_task_shortest"
    build_training_corpus(
        "a", a / "trajectories.parquet", a / "quality.parquet", a / "train", per_task="longest"
    )
    assert kept(a) == ["a1", "a4", "a5", "a6"]


def test_common_tasks_keeps_what_every_source_solved(tmp_path):
    a, b = corpus_files(tmp_path, "a", ROWS_A), corpus_files(tmp_path, "b", ROWS_B)
    both = {"a": (a / "trajectories.parquet", []), "b": (b / "trajectories.parquet", [])}
    stats = build_training_corpus(
        "a", a / "trajectories.parquet", a / "quality.parquet", a / "train", common_with=both
    )
    assert kept(a) == ["a1", "a2", "a3", "a4"]  # t1, t2 are common; t3 and the task-less a5 go
    assert stats["removed"] == {"no_task_id": 1, "not_common_task": 1}
    assert stats["common_tasks"] == {"tasks": 2, "sources": ["a", "b"]}
    # removals decided upstream (decontamination, the judge) come first: without b's t2, t2 is not common
    verdict = tmp_path / "verdict.parquet"
    pq.write_table(pa.table({"traj_id": ["b2"], "reason": ["contaminated"], "detail": ["x"]}), verdict)
    both["b"] = (b / "trajectories.parquet", [verdict])
    build_training_corpus(
        "a", a / "trajectories.parquet", a / "quality.parquet", a / "train", common_with=both
    )
    assert kept(a) == ["a1", "a2", "a3"]


def test_filters_fail_with_named_errors_never_an_empty_corpus(tmp_path):
    a, b = corpus_files(tmp_path, "a", ROWS_A), corpus_files(tmp_path, "b", [("b1", None, 1, 1)])
    both = {"a": (a / "trajectories.parquet", []), "b": (b / "trajectories.parquet", [])}
    args = ("a", a / "trajectories.parquet", a / "quality.parquet", a / "train")
    with pytest.raises(FilterError, match="source 'b' has no task ids in column 'task'"):
        build_training_corpus(*args, common_with=both)
    c = corpus_files(tmp_path, "c", [("c1", "t9", 1, 1)])
    with pytest.raises(FilterError, match=r"no task in common \(a: 3 tasks, c: 1 tasks\)"):
        build_training_corpus(*args, common_with={"a": both["a"], "c": (c / "trajectories.parquet", [])})
    with pytest.raises(FilterError, match="corpus.task_key: 'episodes' is not a trajectory column"):
        build_training_corpus(*args, task_key="episodes")
    everything = tmp_path / "all.parquet"
    pq.write_table(pa.table({"traj_id": [r[0] for r in ROWS_A], "reason": ["judge_below_threshold"] * 6,
                             "detail": [""] * 6}), everything)  # fmt: skip
    with pytest.raises(FilterError, match=r"no trajectory left .*judge_below_threshold': 6"):
        build_training_corpus(*args, removal_paths=[everything])
    assert not (a / "train" / "trajectories.parquet").exists()


# ---------------------------------------------------------------------------------------------
# selection by TOR


POOL = [{"traj_id": t, "n_window_tokens": w} for t, w in
        [("p1", 5), ("p2", 5), ("p3", 5), ("p4", 5), ("p5", 0), ("p6", 5)]]  # fmt: skip
TOR = {"p1": 0.5, "p2": 0.9, "p3": 0.5, "p4": math.nan, "p5": 1.0, "p6": 0.1}


def test_tor_selections_rank_the_same_pool_at_equal_budgets():
    top = select_by_tor(POOL, TOR, "tor-top", 0.5)  # 5 trajectories with a window token: ceil(2.5) = 3
    assert [r["traj_id"] for r in top] == ["p2", "p1", "p3"]  # ties by traj_id; p5 has no window token
    bottom = select_by_tor(POOL, TOR, "tor-bottom", 0.5)
    assert [r["traj_id"] for r in bottom] == ["p6", "p1", "p3"]
    everything = select_by_tor(POOL, TOR, "tor-top", 1.0)
    assert everything[-1] == {"traj_id": "p4", "score": None, "rank": 5}  # no action, no TOR: last
    scores = [{"traj_id": r["traj_id"], "score": None if r["n_window_tokens"] == 0 else -1.0} for r in POOL]
    assert len(top) == len(select(scores, "top", 0.5, seed=0)) == keep_count(0.5, 5)
    with pytest.raises(ValueError, match="unknown selection 'tor-middle'"):
        select_by_tor(POOL, TOR, "tor-middle", 0.5)
    with pytest.raises(ValueError, match="no TOR for 1 pool trajectories"):
        select_by_tor(POOL, {k: v for k, v in TOR.items() if k != "p6"}, "tor-top", 0.5)


# ---------------------------------------------------------------------------------------------
# observation masking, the blind teacher


def test_drop_observations_keeps_the_framing_and_the_turns():
    forms = observation_forms(REPO / "demo" / "prompt.yaml")
    conv = [
        {"role": "user", "content": "Task Description:\nx\n\nCurrent terminal state:\nroot@box:/app# "},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "New Terminal Output:\nroot@box:/app# ls\ndata.csv\nroot@box:/app# "},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "Your answer could not be used:\nbad\n\nReply with one valid JSON object."},
        {"role": "assistant", "content": "a3"},
        {"role": "user", "content": "Warnings:\n- w\n\nNew Terminal Output:\n3\n\nShould I mark the task as complete? "
                                    "Reply with task_complete true again to confirm."},
        {"role": "assistant", "content": "a4"},
    ]  # fmt: skip
    out = drop_observations(conv, forms)
    assert [m["role"] for m in out] == [m["role"] for m in conv] and out[0] == conv[0]
    assert out[2]["content"] == "New Terminal Output:\n"
    assert out[4] == conv[4]  # a parse-error reply is not an observation
    assert out[6]["content"] == ("Warnings:\n- w\n\nNew Terminal Output:\n\n\nShould I mark the task as complete? "
                                 "Reply with task_complete true again to confirm.")  # fmt: skip
    assert [m["content"] for m in out[1::2]] == ["a1", "a2", "a3", "a4"]


def test_the_blind_teacher_acts_without_inspecting():
    from horizon.eval.collect.teacher import load_plan, script

    plan = load_plan(REPO / "demo" / "tasks" / "count-rows")
    for variant in range(4):
        careful, blind = script(plan, variant), script(plan, variant, "blind")
        inspected = {c for _, cmds, _ in careful for c in cmds if c in plan["inspect"]}
        assert inspected and not any(c in plan["inspect"] for _, cmds, _ in blind for c in cmds)
        assert [c for _, c, _ in blind if c] == [
            c for _, c, _ in careful if c and not set(c) <= set(plan["inspect"])
        ]
        assert blind[-2:] == careful[-2:]  # complete, then confirm


def test_masked_shards_record_the_setting_and_training_refuses_stale_ones(tiny_corpus, tmp_path):
    from horizon.data.tokens import shards_observations, tokenize_shard
    from horizon.train.examples import check_observations

    template = tmp_path / "prompt.yaml"  # the fixture corpus's harness: "New Terminal Output:\n{output}"
    template.write_text('observation: "New Terminal Output:\\n{output}"\nconfirm: "{output}\\n\\nAre you sure'
                        ' you want to mark the task as complete? If so, include \\"task_complete\\": true in your'
                        ' JSON response again."\n')  # fmt: skip
    keep, drop = tmp_path / "keep.parquet", tmp_path / "drop.parquet"
    tokenize_shard(tiny_corpus / "traj.parquet", tiny_corpus / "student", keep, 0, 1)
    tokenize_shard(tiny_corpus / "traj.parquet", tiny_corpus / "student", drop, 0, 1, observations="drop",
                   template=template)  # fmt: skip
    assert shards_observations([keep, drop]) == {str(keep): "keep", str(drop): "drop"}
    n_keep = pq.read_table(keep, columns=["n_tokens"]).column("n_tokens").to_pylist()
    n_drop = pq.read_table(drop, columns=["n_tokens"]).column("n_tokens").to_pylist()
    assert all(d < k for d, k in zip(n_drop, n_keep))  # the terminal output is gone, the turns stay
    turns = pq.read_table(drop, columns=["turns"]).column("turns").to_pylist()
    traj = pq.read_table(tiny_corpus / "traj.parquet", columns=["n_turns"]).column("n_turns").to_pylist()
    assert [max(t) + 1 for t in turns] == traj
    check_observations([drop], "drop")
    with pytest.raises(
        ValueError, match="tokenized with train.observations = keep, but the config says drop"
    ):
        check_observations([keep], "drop")
    with pytest.raises(ValueError, match="needs the prompt template"):
        tokenize_shard(tiny_corpus / "traj.parquet", tiny_corpus / "student", drop, 0, 1, observations="drop")
