"""The bundled DMPO training tasks are sound: the scripted teacher solves each of them through the real
harness in every variant (its mistakes really fail and are recovered), as it does the evaluated tasks."""

import pytest

from horizon.eval.collect.corpus import collect
from horizon.eval.tasks.benchmark import write_manifest
from tests.helpers import REPO

pytestmark = pytest.mark.engine


def test_the_teacher_solves_every_bundled_training_task(tools, tmp_path):
    write_manifest(REPO / "demo" / "train-tasks", "harbor", tmp_path / "tasks.json")
    info = collect(tmp_path / "tasks.json", REPO / "demo" / "prompt.yaml", tmp_path / "corpus.jsonl",
                   variants=4, concurrency=2, sandbox_options={"toolchain": tools})  # fmt: skip
    assert info["trajectories"] == 6 * 4  # collect raises when the teacher fails any task or variant
