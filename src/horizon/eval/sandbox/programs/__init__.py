"""Programs that run inside a sandbox, under whatever python3 the sandbox has (standard library only).

horizon does not run them here: it reads their text (`source`) and puts it in the sandbox.

- `init.py`: pid 1 of a local sandbox (starts each command sent over its socket, reaps orphans,
  kills every other process before grading).
- `uvshim.py`: bin/uv and bin/uvx of the graders' toolchain: the real uv, offline, its requirements
  pinned to the wheelhouse (tests/unit import it to check its rewrites).
- `pytest_guard.py`: lib/horizon_pytest_guard.py of the toolchain: the grader's pytest loads its
  plugins through it (every pytest11 entry point but those the agent added or changed).

Imports: nothing of horizon.
"""

from pathlib import Path

DIR = Path(__file__).resolve().parent


def source(name: str) -> str:
    """The text of the program `name` (init.py, uvshim.py), as it is written into a sandbox."""
    return (DIR / name).read_text()
