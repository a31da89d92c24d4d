"""Run under the reference environment (.venv-harbor): the published graders' verdicts on given outputs.

stdin: {"tb1": [[parser, text], ...], "reward": [[file name, content], ...]}; stdout: the verdicts.
terminal-bench's PytestParser / SWEBenchParser parse the text (a ValueError is their parse error);
harbor's Verifier parses a reward file written to a temporary directory, and its VerifierResult model
validates what it returns. Nothing of theirs is copied: their code is imported from the installed packages.
"""

import json
import sys
import tempfile
import types
from pathlib import Path


def tb1(parser: str, text: str) -> dict:
    from terminal_bench.parsers.base_parser import UnitTestStatus
    from terminal_bench.parsers.pytest_parser import PytestParser
    from terminal_bench.parsers.swebench_parser import SWEBenchParser

    p = PytestParser() if parser == "pytest" else SWEBenchParser()
    try:
        results = p.parse(text)
    except ValueError:
        return {"parsed": False, "resolved": False, "results": {}}
    passed = {k: v == UnitTestStatus.PASSED for k, v in results.items()}
    return {"parsed": True, "resolved": all(passed.values()), "results": passed}


def reward(name: str, content: str) -> dict:
    from harbor.models.verifier.result import VerifierResult
    from harbor.verifier.verifier import Verifier

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
        path.write_text(content)
        paths = types.SimpleNamespace(
            reward_text_path=Path(d) / "reward.txt", reward_json_path=Path(d) / "reward.json"
        )
        fake = types.SimpleNamespace(trial_paths=paths)
        parse = Verifier._parse_reward_json if name == "reward.json" else Verifier._parse_reward_text
        try:
            rewards = VerifierResult(rewards=parse(fake)).rewards
        except Exception as e:  # their errors: parse, empty file, validation
            return {"valid": False, "error": type(e).__name__}
        return {"valid": True, "rewards": rewards}


def main() -> None:
    req = json.load(sys.stdin)
    out = {
        "tb1": [tb1(p, t) for p, t in req.get("tb1", [])],
        "reward": [reward(n, c) for n, c in req.get("reward", [])],
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
