"""`make mutants`: what mutmut's fork server holds before it forks a process for each mutant.

mutmut (`[tool.mutmut]` in pyproject.toml, process_isolation = "forkserver") starts a server that
collects the selected tests once (`pytest --collect-only`), then forks it for every mutant; the fork
runs pytest again on the tests that reach the mutated function (`-x`: up to the first failure). A fork
inherits what the server imported, and imports again whatever a test imports lazily. Measured on
2026-12-06 (docs/development/tests.md, "Mutation testing"), each fork spent:

- 3.3 CPU-seconds (15 s of wall time on the shared machine) importing what the `tiny_corpus` fixture
  imports lazily (transformers' Qwen3 model, DeepSpeed, sympy, pandas), for 0.03 s of its own work,
  in every mutant that a scorer or pool test reaches;
- half of pytest's own 0.3 s in the garbage collection at its end (pytest's unraisableexception
  plugin), which walked the server's whole heap (torch's objects) again.

So under mutmut (it sets MUTANT_UNDER_TEST; nothing here acts outside it), the server builds the tiny
corpus once after collection (every import its fixture needs), then freezes its objects out of the
collector's reach (gc.freeze); and the tests that use the tiny corpus run after the others, so that a
mutant a cheap test kills never pays for the student.
"""

from __future__ import annotations

import gc
import os
import tempfile
from pathlib import Path

import pytest

_warmed = False


def under_mutmut() -> bool:
    """Whether mutmut runs these tests (`make mutants`): its runs set MUTANT_UNDER_TEST."""
    return "MUTANT_UNDER_TEST" in os.environ


def pytest_collection_finish(session):
    global _warmed
    if not under_mutmut() or _warmed:  # a fork inherits _warmed from its server: once per server
        return
    _warmed = True
    from transformers import AutoModelForCausalLM

    from tests.helpers import build_tiny_corpus

    with tempfile.TemporaryDirectory(prefix="horizon-mutants-warmup-") as d:
        AutoModelForCausalLM.from_pretrained(build_tiny_corpus(Path(d)) / "student")
    gc.collect()
    gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    if under_mutmut():  # stable: the cheap tests in their order, then the tiny student's
        items.sort(key=lambda item: "tiny_corpus" in getattr(item, "fixturenames", ()))
