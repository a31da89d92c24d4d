"""harbor_engine rows in the tables: a table says which harness produced each row, and a table of
horizon-only attempts stays byte for byte what it was."""

import json

from tests.unit.report.test_tables import build, manifest, rec, write_run


def runs(tmp_path, harness_of: dict[str, str | None]):
    paths = []
    for model, harness in harness_of.items():
        recs = [
            rec("t0", 0, 0, True, 3),
            rec("t0", 1, 0, False, 3),
            rec("t1", 0, 0, True, 4),
            rec("t1", 1, 0, True, 5),
        ]
        if harness:
            recs = [{**r, "harness": harness} for r in recs]
        paths += write_run(tmp_path, model, [recs, recs])
    return paths


def test_harbor_engine_rows_are_marked_in_every_table_that_names_models(tmp_path):
    models = ["single-K8", "single-K16"]
    paths = runs(tmp_path, {"single-K8": "harbor", "single-K16": "horizon"})
    kw = {"rollouts": paths, "manifests": manifest(tmp_path), "models": models}
    t, tidy = build("reliability", tmp_path, **kw)
    md = t.markdown()
    assert "| single-stage K=8 [harbor] |" in md and "| single-stage K=16 |" in md
    assert "Harness: single-stage K=8 [harbor] ran through Harbor's harness" in t.caption
    assert {r["model"]: r["harness"] for r in tidy} == {"single-K8": "harbor", "single-K16": "horizon"}
    assert "harness" in (tmp_path / "reliability.csv").read_text().splitlines()[0]
    assert "[harbor]" in (tmp_path / "reliability.tex").read_text()
    tasks, _ = build("tasks", tmp_path, **kw)  # models are columns there
    assert "single-K8 [harbor]" in tasks.columns and "single-K16" in tasks.columns
    episodes, _ = build("episodes", tmp_path, **kw)
    assert "single-stage K=8 [harbor]" in episodes.columns


def test_harbor_engine_horizon_only_tables_are_unchanged(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for root, harness in ((a, None), (b, "horizon")):  # records from before the field, and with it
        root.mkdir()
        kw = {
            "rollouts": runs(root, {"single-K8": harness}),
            "manifests": manifest(root),
            "models": ["single-K8"],
        }
        t, tidy = build("reliability", root, **kw)
        assert "[horizon]" not in t.markdown() and "Harness" not in t.caption and "harness" not in tidy[0]
    for ext in ("md", "csv", "tex"):
        assert (a / f"reliability.{ext}").read_bytes() == (b / f"reliability.{ext}").read_bytes()


def test_harbor_engine_mixed_harnesses_in_one_model_are_named(tmp_path):
    recs = [
        rec("t0", 0, 0, True, 3),
        rec("t0", 1, 0, True, 3),
        rec("t1", 0, 0, True, 3),
        rec("t1", 1, 0, True, 3),
    ]
    paths = write_run(tmp_path, "single-K8", [recs, [{**r, "harness": "harbor"} for r in recs]])
    t, tidy = build("behaviour", tmp_path, rollouts=paths, manifests=manifest(tmp_path), models=["single-K8"])
    assert "| single-stage K=8 [harbor+horizon] |" in t.markdown() and tidy[0]["harness"] == "harbor+horizon"
    assert json.loads(json.dumps(tidy))  # the CSV rows stay plain values
