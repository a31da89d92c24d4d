"""Driving every seed against the SCRIPTED synthesis server (tests/doubles/scripted_synth.py: a FAKE,
no model behind it): an endpoint that is down is a named error and nothing is journaled."""

import pytest

from horizon.eval.models.backends import ChatBackend
from horizon.synth.run import SynthError, synthesize
from horizon.synth.seeds import load_seeds
from tests.doubles.servers import scripted_synth_server
from tests.helpers import FIXTURES, REPO, synth_settings

SEEDS = FIXTURES / "synth" / "seeds.jsonl"
PROMPTS = REPO / "workflow" / "synth" / "prompts"


def test_endpoint_down_is_a_named_error_and_nothing_is_journaled(tmp_path):
    seeds = load_seeds(SEEDS, None, 5)
    with scripted_synth_server("--status", 503) as url:
        backend = ChatBackend(url, "author", retries=0)
        with pytest.raises(
            SynthError, match=r"endpoint failed .*503.*0 of 6 seeds are finished.*rerun to resume"
        ):
            synthesize(seeds, backend, backend, synth_settings(model="author"), PROMPTS, tmp_path,
                       concurrency=1)  # fmt: skip
    assert not (tmp_path / "synth.partial.jsonl").exists() and not (tmp_path / "tasks.json").exists()
