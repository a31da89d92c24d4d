"""Their side of the conformance loops: the suite's driver (reference_driver.py) run under the
reference environment's interpreter, with the product's programs for that interpreter beside it."""

from __future__ import annotations

from pathlib import Path

from horizon.eval.reference import programs
from horizon.eval.reference.environment import run_program

DRIVER = Path(__file__).with_name("reference_driver.py")


def run_driver(requests: list[dict]) -> list:
    """The driver's results, one per request (all in one process: their agent module takes seconds to import)."""
    return run_program(requests, program=DRIVER, args=[str(programs.DIR)])
