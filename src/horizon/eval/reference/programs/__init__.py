"""Programs for the reference environment's interpreter (`.venv-harbor`, Python >= 3.12, `make refenv`).

horizon never imports them: it runs them as files under that interpreter
(horizon.eval.reference.environment.run_program), and they import only the standard library and
the published packages (harbor 0.26.0, terminal-bench 0.2.18).

- `export_template.py`: their prompt turns as a horizon template (`eval.prompt_template:
  terminus-2-harbor | terminus-2-tb1`, `horizon terminus-template`).
- `terminus_loop.py`: their agent loop on a scripted model and terminal, loaded by path by the export
  (and by the conformance suite's driver, tests/conformance/reference_driver.py).
"""

from pathlib import Path

DIR = Path(__file__).resolve().parent
EXPORT_TEMPLATE = DIR / "export_template.py"
