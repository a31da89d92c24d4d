"""Every form of `.pth` line that Python 3.11, 3.12 or 3.13 runs at start-up is found by the audit.

FORMS says, for each form, which of those versions execute its payload (read from each version's
site.addpackage: 3.11/3.12 read a text stream with universal newlines and the locale's encoding;
3.13 decodes as utf-8-sig and splits with str.splitlines). The static test holds the audit to that
table on any machine; the differential test plants every form in a temporary site directory and
checks the table against each of those Pythons this machine has (it runs on the ones it finds and
says which; the tests' own Python is always one).
"""

import glob
import os
import shutil
import subprocess
import sys

import pytest

from horizon.eval.sandbox.pth import executable_pth
from tests.helpers import REPO
from tests.unit.eval.sandbox.test_integrity import NSPKG

ALL, OLD, NEW = {"3.11", "3.12", "3.13"}, {"3.11", "3.12"}, {"3.13"}


RECORD = "sys.__dict__.setdefault('hz_ran', []).append"  # a list on the sys module, read after site


def payload(name: str, sep: str = " ") -> str:
    """A line that records that it ran."""
    return f"import{sep}sys; {RECORD}({name!r})"


NS = NSPKG.rstrip("\n")
# setuptools' namespace line in its two other forms (older releases, and `setup.py develop`), as it
# writes them: a parent and a child package, so the path tuple holds two names
_ROOT = "p = os.path.join(sys._getframe(1).f_locals['sitedir'], *('zope', 'event'))"
_TAIL = (
    "m = m or sys.modules.setdefault('zope.event', types.ModuleType('zope.event'));"
    "mp = (m or []) and m.__dict__.setdefault('__path__',[]);(p not in mp) and mp.append(p)"
)
NS_OLD = (
    "import sys, types, os;has_mfs = sys.version_info > (3, 5);" + _ROOT + ";"
    "importlib = has_mfs and __import__('importlib.util');has_mfs and __import__('importlib.machinery');"
    "m = has_mfs and sys.modules.setdefault('zope.event', importlib.util.module_from_spec("
    "importlib.machinery.PathFinder.find_spec('zope.event', [os.path.dirname(p)])));" + _TAIL
)
NS_DEVELOP = (
    "import sys, types, os;"
    + _ROOT
    + ";ie = os.path.exists(os.path.join(p,'__init__.py'));"
    + _TAIL.replace("m = m or sys", "m = not ie and sys")
)
CHILD = ";m and setattr(sys.modules['zope'], 'event', m)"
# name -> (the file's bytes, the versions that run its payload)
FORMS = {
    "space": (payload("space") + "\n", ALL),
    "tab": (payload("tab", "\t") + "\n", ALL),
    "bom": ("\ufeff" + payload("bom") + "\n", NEW),  # 3.13 drops the byte-order mark
    "bom-second-line": ("\ufeff/nowhere\n" + payload("bom-second-line") + "\n", ALL),
    "no-newline": (payload("no-newline"), ALL),
    "crlf": ("/nowhere\r\n" + payload("crlf") + "\r\n", ALL),
    "cr": ("/nowhere\r" + payload("cr") + "\r", ALL),
    "form-feed": ("# a comment\x0c" + payload("form-feed") + "\n", NEW),  # one comment line for 3.11
    "vertical-tab": ("/nowhere\x0b" + payload("vertical-tab") + "\n", NEW),
    "group-separator": ("/nowhere\x1d" + payload("group-separator") + "\n", NEW),
    "line-separator": ("/nowhere\u2028" + payload("line-separator") + "\n", NEW),
    "next-line": ("/nowhere\x85" + payload("next-line") + "\n", NEW),
    # setuptools' namespace line glued to more code by a form feed: one line (all of it runs) for 3.11
    "namespace-glued": (NS + "\x0c;" + payload("namespace-glued").split("; ", 1)[1] + "\n", OLD),
    "leading-space": (" " + payload("leading-space") + "\n", set()),  # a path for every version
    "leading-tab": ("\t" + payload("leading-tab") + "\n", set()),
    "no-separator": (payload("no-separator").replace("import ", "import(") + "\n", set()),
    "comment": ("#" + payload("comment") + "\n", set()),
    "namespace-old": (NS_OLD + CHILD + "\n", set()),  # setuptools' lines run no payload
    "namespace-develop": (NS_DEVELOP + CHILD + "\n", set()),
    # the namespace line's shape with code among the path's names: it runs before the join fails
    "namespace-code-in-path": (
        NS.replace("('google',)", "('google', " + RECORD + "('namespace-code-in-path'))") + "\n",
        ALL,
    ),
    # syntax 3.11 cannot parse (PEP 701 quotes): the audit's own Python may be older than the grader's
    "newer-syntax": ("import sys; " + RECORD + '(f"{"newer-syntax"}")\n', {"3.12", "3.13"}),
}


@pytest.mark.parametrize("name", FORMS)
def test_the_audit_flags_every_form_some_python_runs(name):
    text, runs = FORMS[name]
    assert bool(executable_pth(text.encode())) == bool(runs), (name, executable_pth(text.encode()))


def test_lines_that_run_code_are_flagged_and_setuptools_namespace_lines_are_not():
    assert executable_pth(NSPKG.encode()) == []
    nested = NS + ";m and setattr(sys.modules['google'], 'cloud', m)\n"
    assert executable_pth(nested.encode()) == []
    for tail in (";import pytest", ";sys.argv[1:] = ['--version']", ";setattr(sys, 'exit', len)"):
        assert executable_pth((NS + tail).encode()) != [], tail
    # no call outside setuptools' own, yet it changes what pytest runs: `pytest --version` exits 0
    assert executable_pth(b"import sys; sys.argv[1:] = ['--version']\n") != []
    assert executable_pth(NS.replace("'importlib.util'", "'evil'").encode()) != []
    # not UTF-8: read as a single-byte locale reads it too, where \x85 ends a line for 3.13
    assert executable_pth(b"/nowhere\xff\x85import os\n") != []


def test_the_evidence_names_each_line_once_as_read_and_cut_at_120_characters():
    # 3.11 reads the line with its form feed (whitespace to Python), 3.13 without: one line named
    assert executable_pth(b"import os; os._exit(0)\x0c\r\n/app\n") == ["import os; os._exit(0)"]
    long = "import os; " + "x = 1; " * 40 + "os._exit(0)"
    assert executable_pth(long.encode()) == [long[:120]]


def pythons() -> dict[str, str]:
    """version -> interpreter, for the 3.11-3.13 this machine has (this Python, the reference env's,
    those on PATH and pyenv's)."""
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    cands = [sys.executable, str(REPO / ".venv-harbor" / "bin" / "python")]
    cands += [shutil.which(f"python3.{m}") or "" for m in (11, 12, 13)]
    cands += sorted(glob.glob(f"{root}/versions/3.1[123]*/bin/python"))
    found = {}
    for c in filter(os.path.exists, cands):
        r = subprocess.run([c, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
        version = r.stdout.strip()
        if r.returncode == 0 and version in ALL:
            found.setdefault(version, c)
    return found


PROBE = "import site, sys; site.addsitedir(sys.argv[1]); print(' '.join(sorted(getattr(sys, 'hz_ran', []))))"


def test_each_python_here_runs_exactly_the_forms_the_table_says(tmp_path, record_property):
    site = tmp_path / "site"
    (site / "google").mkdir(parents=True)  # the namespace line finds its package
    for i, (name, (text, _)) in enumerate(FORMS.items()):
        (site / f"{i:02d}-{name}.pth").write_bytes(text.encode())
    found = pythons()
    assert sys.version_info[:2] >= (3, 11) and found, "the tests' own Python is one of 3.11-3.13"
    record_property("pythons", " ".join(sorted(found)))
    print(f"\n.pth forms checked on Python {', '.join(sorted(found))}")
    env = {"PATH": os.environ.get("PATH", ""), "LC_ALL": "C.UTF-8"}  # the grader's locale
    for version, exe in found.items():
        r = subprocess.run([exe, "-I", "-S", "-c", PROBE, str(site)], capture_output=True, text=True,
                           env=env, timeout=60)  # fmt: skip
        assert r.returncode == 0, (version, r.stderr)
        ran = set(r.stdout.split())
        expected = {name for name, (_, runs) in FORMS.items() if version in runs}
        assert ran == expected, f"Python {version}: ran {sorted(ran)}, the table says {sorted(expected)}"
