"""The published Terminus-2, read and run at run time from its own environment.

The reference implementations (`harbor` 0.26.0 for Harbor task sets, `terminal-bench` 0.2.18 for
Terminal-Bench v1) need Python >= 3.12 and pull litellm and friends, so they live in their own
virtual environment (`make refenv` builds `.venv-harbor`), never in horizon's. Two things use it:

- `eval.prompt_template: terminus-2-harbor | terminus-2-tb1`: `export_template` runs their agent
  loop (programs/export_template.py, under their interpreter) with marker values and writes every
  prompt turn as a horizon template, so our loop sends their wording byte for byte. Nothing of their text
  is stored in this repository: the template is written under results/.
- the words of the parser's errors and warnings, when the template came from them:
  `ReferenceParser` loads their parser module by file path (it needs only the standard library, so
  it imports under our Python) and words the feedback exactly as they do. Our own parser
  (horizon.terminus) still decides; a disagreement is reported.

Where the environment is: `eval.reference_env` (default `.venv-harbor`, relative to the working
directory), overridden by the HORIZON_REFERENCE_ENV environment variable.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from horizon.eval.reference.programs import EXPORT_TEMPLATE
from horizon.resources import made_in_checkout, reference_pins

log = logging.getLogger("horizon.eval.reference.environment")

SOURCES = {"terminus-2-harbor": "harbor", "terminus-2-tb1": "tb1"}
PACKAGES = {"harbor": reference_pins()["harbor"], "tb1": reference_pins()["terminal-bench"]}


class ReferenceMissing(RuntimeError):
    """The reference environment (or a package in it) is not there."""


def env_dir(env: str | Path | None = None) -> Path:
    """The reference environment's directory: HORIZON_REFERENCE_ENV, else `env` (None: the schema's
    eval.reference_env default, .venv-harbor); a relative path is looked up in the working directory,
    then in the checkout horizon runs from (a run with --directory elsewhere, or the workflow used as
    a module, finds the one `make refenv` built)."""
    from horizon.config import schema_property

    default = schema_property("eval", "reference_env")["default"]
    return made_in_checkout(os.environ.get("HORIZON_REFERENCE_ENV") or env or default)


def python(env: str | Path | None = None) -> Path:
    exe = env_dir(env) / "bin" / "python"
    if not exe.exists():
        raise ReferenceMissing(
            f"the reference Terminus-2 environment is missing: no {exe} (it holds {PACKAGES['harbor']} and "
            f"{PACKAGES['tb1']} on a Python >= 3.12); build it with `make refenv`, or point eval.reference_env "
            "(or HORIZON_REFERENCE_ENV) at such an environment"
        )
    return exe


def available(env: str | Path | None = None) -> bool:
    try:
        python(env)
        return True
    except ReferenceMissing:
        return False


def run_program(
    requests: list[dict],
    env: str | Path | None = None,
    timeout: float = 900,
    program: Path = EXPORT_TEMPLATE,
    args: Sequence[str] = (),
) -> list:
    """Run `program` (a script for the reference interpreter: JSON requests on stdin, a JSON list of
    results on stdout) on a batch of requests; by default the template export."""
    exe = python(env)
    p = subprocess.run(
        [str(exe), str(program), *args],
        input=json.dumps(requests),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip()[-2000:]
        if "is not installed" in tail:
            raise ReferenceMissing(f"{exe}: {tail.splitlines()[-1]} (run `make refenv`)")
        raise RuntimeError(f"the reference program failed ({exe} {program}):\n{tail}")
    return json.loads(p.stdout)


def export_template(source: str, out: str | Path, env: str | Path | None = None):
    """Write the prompt template of `source` (terminus-2-harbor | terminus-2-tb1) to `out`."""
    from horizon.eval.agent.prompts import Template

    if source not in SOURCES:
        raise ValueError(f"unknown Terminus-2 template {source!r}: one of {', '.join(SOURCES)}")
    data = run_program([{"op": "export", "variant": SOURCES[source]}], env)[0]
    template = Template.from_dict(data, origin=f"{source} ({PACKAGES[SOURCES[source]]})")
    template.save(out)
    log.info("prompt template %s read from %s -> %s", source, env_dir(env), out)
    return template


class ReferenceParser:
    """Their parser, loaded by file path (once per path), used for the words of the feedback only."""

    _modules: dict[Path, object] = {}

    def __init__(self, module_path: str | Path):
        path = Path(module_path)
        if path in self._modules:
            self.parser, self.path = self._modules[path].TerminusJSONPlainParser(), path
            return
        if not path.exists():
            raise ReferenceMissing(
                f"the template's parser module {path} is gone (was the reference environment removed? "
                "run `make refenv` and regenerate the template)"
            )
        name = f"_terminus_parser_{abs(hash(str(path)))}"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        self._modules[path] = mod
        self.parser = mod.TerminusJSONPlainParser()
        self.path = path

    def feedback(self, answer: str) -> tuple[str, str, bool, bool]:
        """(error, warning, has_error, complete) as their parser words and judges `answer`."""
        r = self.parser.parse_response(answer)
        return r.error, r.warning, bool(r.error), bool(r.is_task_complete)
