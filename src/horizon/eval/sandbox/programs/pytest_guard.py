"""pytest's plugins for the grader: every pytest11 entry point of this interpreter but the agent's.

Installed in the graders' toolchain as lib/horizon_pytest_guard.py; the grader's environment sets
PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 and PYTEST_PLUGINS=horizon_pytest_guard, so pytest loads no plugin
by itself and this module registers them as its autoload would (by entry point name, after `-p`
options, a blocked name left out), except a plugin whose distribution has a file the agent added or
changed (its dist-info, a file of its RECORD) and one whose module resolves to such a file. The
harness writes those files, one path a line, beside this module (horizon_pytest_guard.changed) or
where HORIZON_PYTEST_GUARD_CHANGED says, after its integrity audit; without it nothing is left out. A plugin installed by the
grader itself (`uvx -w pytest-json-ctrf`) is new after the audit, so it loads.

Runs inside the sandbox under whatever Python runs pytest: standard library only.
"""

import importlib.metadata
import importlib.util
import os
import sys

CHANGED = os.environ.get("HORIZON_PYTEST_GUARD_CHANGED") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "horizon_pytest_guard.changed"
)
_done = []


def _changed():
    try:
        with open(CHANGED, encoding="utf-8") as fh:
            return {os.path.realpath(line.rstrip("\n")) for line in fh if line.strip()}
    except OSError:
        return set()


def _dist_files(dist):
    """The files of a distribution: its metadata directory's and those its RECORD lists."""
    out = set()
    base = getattr(dist, "_path", None)
    if base is not None:
        base = os.path.realpath(str(base))
        out.add(base)
        try:
            out.update(os.path.join(base, n) for n in os.listdir(base))
        except OSError:
            pass
    for f in dist.files or ():
        out.add(os.path.realpath(str(dist.locate_file(f))))
    return out


def _module_files(value):
    """The files `module.sub:attr` would be imported from, found without importing anything."""
    names = value.split(":", 1)[0].strip().split(".")
    try:
        spec = importlib.util.find_spec(names[0])
    except (ImportError, ValueError):
        return set()
    if spec is None:
        return set()
    out = {os.path.realpath(spec.origin)} if spec.origin else set()
    where = list(spec.submodule_search_locations or [])
    for name in names[1:]:
        found = []
        for d in where:
            for cand in (os.path.join(d, name, "__init__.py"), os.path.join(d, name + ".py")):
                if os.path.exists(cand):
                    out.add(os.path.realpath(cand))
                    found.append(os.path.dirname(cand) if cand.endswith("__init__.py") else None)
                    break
        where = [d for d in found if d]
    return out


def _entry_points():
    eps = importlib.metadata.entry_points()
    return list(eps.select(group="pytest11") if hasattr(eps, "select") else eps.get("pytest11", []))


def pytest_plugin_registered(plugin, manager):
    """Once, when this module is registered: the plugins pytest's autoload would have registered."""
    if plugin is not sys.modules.get(__name__) or _done:
        return
    _done.append(True)
    changed = _changed()
    seen = set()
    for ep in _entry_points():
        if ep.name in seen or manager.is_blocked(ep.name) or manager.get_plugin(ep.name) is not None:
            continue
        seen.add(ep.name)
        dist = getattr(ep, "dist", None)
        touched = (_dist_files(dist) if dist is not None else set()) | _module_files(ep.value)
        if changed and touched & changed:
            sys.stderr.write(f"horizon: pytest plugin {ep.name} not loaded (the agent changed its files)\n")
            continue
        manager.register(ep.load(), name=ep.name)
