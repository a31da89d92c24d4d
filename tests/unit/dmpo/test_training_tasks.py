"""DMPO's training tasks are kept apart from the benchmarks."""

import shutil

import pytest

from horizon.eval.tasks.benchmark import write_manifest
from tests.helpers import REPO


def test_training_tasks_that_are_benchmark_tasks_are_refused_by_id_and_by_instruction(tmp_path):
    from horizon.dmpo.training_tasks import training_manifest

    bench = tmp_path / "bench.json"
    write_manifest(REPO / "demo" / "tasks", "harbor", bench, name="demo")
    train = tmp_path / "train"
    shutil.copytree(REPO / "demo" / "train-tasks", train)
    # the bundled training tasks are apart from the bundled benchmark
    m = training_manifest(
        {"format": "harbor", "path": str(train)}, tmp_path, tmp_path / "ok.json", {"demo": bench}
    )
    assert len(m["tasks"]) == 6 and (tmp_path / "ok.json").exists()
    shutil.copytree(REPO / "demo" / "tasks" / "count-rows", train / "count-rows")  # the same task id
    shutil.copytree(REPO / "demo" / "tasks" / "word-count", train / "poem-words")  # the same instruction...
    ins = train / "poem-words" / "instruction.md"
    ins.write_text("  " + ins.read_text().replace(" ", "  \n ") + "\n\n")  # ...up to white space
    with pytest.raises(ValueError) as e:
        training_manifest(
            {"format": "harbor", "path": str(train)}, tmp_path, tmp_path / "bad.json", {"demo": bench}
        )
    msg = str(e.value)
    assert "2 training tasks are evaluated tasks, refused" in msg
    assert "task 'count-rows' is task 'count-rows' of benchmark 'demo' (same task id)" in msg
    assert "task 'poem-words' has the instruction of task 'word-count' of benchmark 'demo'" in msg
    assert not (tmp_path / "bad.json").exists()
