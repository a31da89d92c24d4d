"""The one placeholder allowed: a stage whose issue has not landed exits non-zero and says so."""

import sys


def not_implemented(stage: str, issue: int) -> None:
    sys.stderr.write(
        f"horizon: stage {stage!r} is not implemented yet (see the issue for {stage}: #{issue})\n"
    )
    sys.exit(3)
