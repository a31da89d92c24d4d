"""A pairs.parquet built from scripted rollout records, for the reference log-probs and the examples."""

import pytest

from horizon.dmpo.pairs import build_pairs
from tests.unit.dmpo.attempts import write_attempts


@pytest.fixture()
def pairs(tmp_path, tiny_corpus):
    f = write_attempts(tmp_path, {"mixed": [True, False, True], "other": [False, True]})
    build_pairs([f], str(tiny_corpus / "student"), str(tmp_path / "pairs.parquet"), str(tmp_path / "pairs.json"),
                policy="single-K8", task_set="t", pairs_per_task=4, seed=0)  # fmt: skip
    return tmp_path / "pairs.parquet"
