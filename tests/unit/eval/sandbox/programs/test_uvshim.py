"""The uv wrapper's adjustments (horizon.eval.sandbox.programs.uvshim), pattern by pattern of the public graders."""

import pytest

from horizon.eval.sandbox.programs import uvshim

HELD = {"pytest": "9.2.0", "pytest-json-ctrf": "0.6.1", "pluggy": "1.7.0"}


def rewrite(args, pythons=("3.11",)):
    notes = []
    found = lambda req, uv, n: req if req in pythons else (n.append(f"no {req}") or "/usr/bin/python3")  # noqa: E731
    orig, uvshim.python_for = uvshim.python_for, found
    try:
        return uvshim.rewrite(args, HELD, "uv", notes), notes
    finally:
        uvshim.python_for = orig


@pytest.mark.parametrize(
    "args, expected",
    [
        # uvx -p <python> -w pytest==… -w pytest-json-ctrf==… pytest --ctrf … -rA (Terminal-Bench 2.0)
        (["tool", "run", "-p", "3.13", "-w", "pytest==8.4.1", "-w", "pytest-json-ctrf==0.3.5", "pytest", "--ctrf",
          "/logs/verifier/ctrf.json", "-p", "no:cacheprovider", "-rA"],
         ["tool", "run", "-p", "/usr/bin/python3", "-w", "pytest==9.2.0", "-w", "pytest-json-ctrf==0.6.1", "pytest",
          "--ctrf", "/logs/verifier/ctrf.json", "-p", "no:cacheprovider", "-rA"]),
        (["add", "pytest==8.4.1"], ["add", "pytest==9.2.0"]),  # uv init; uv add pytest==8.4.1 (TB1 template)
        (["add", "pytest"], ["add", "pytest"]),  # unpinned: left to uv
        (["pip", "install", "pytest==8.4.1", "requests==2.0"], ["pip", "install", "pytest==9.2.0", "requests==2.0"]),
        (["run", "--with", "pytest==8.4.1,pluggy>=1", "pytest", "-p", "x"],
         ["run", "--with", "pytest==9.2.0,pluggy==1.7.0", "pytest", "-p", "x"]),
        (["run", "--python=3.11", "pytest", "x.py"], ["run", "--python=3.11", "pytest", "x.py"]),
        (["tool", "run", "pytest@8.4.1", "-rA"], ["tool", "run", "pytest@9.2.0", "-rA"]),
        (["tool", "run", "--from", "pytest==8.4.1", "py.test"], ["tool", "run", "--from", "pytest==9.2.0", "py.test"]),
        (["tool", "run", "--with-requirements", "req.txt", "pytest"], ["tool", "run", "--with-requirements", "req.txt", "pytest"]),
        (["venv", "-p", "3.12", ".tbench"], ["venv", "-p", "/usr/bin/python3", ".tbench"]),
        (["init"], ["init"]),
        (["run", "parser.py"], ["run", "parser.py"]),
    ],
)  # fmt: skip
def test_rewrites_only_what_cannot_be_had_offline(args, expected):
    assert rewrite(args)[0] == expected


def test_each_adjustment_is_said():
    _, notes = rewrite(
        ["tool", "run", "-p", "3.13", "-w", "pytest[testing]==8.4.1; python_version>'3'", "pytest"]
    )
    assert notes == ["no 3.13", "pytest[testing]==8.4.1; python_version>'3' -> pytest[testing]==9.2.0; "
                     "python_version>'3' (the offline wheelhouse)"]  # fmt: skip
