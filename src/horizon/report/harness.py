"""Which harness produced a table's rows (attempts.jsonl records say it: `harness`, horizon or harbor).

A table whose rows all come from horizon's own harness is left exactly as it is. Otherwise every row,
column or block named after a model whose attempts came (also) from another harness gets a mark, e.g.
"single-stage K=8192 [harbor]", the caption says what the marks mean and lists those models, and
each tidy CSV row that names a model gets a `harness` column.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from horizon.grid import ModelName, parse_rollout_path
from horizon.report.metrics import read_attempts
from horizon.report.render import Table

OWN = "horizon"


def harnesses(rollouts: Sequence[str]) -> dict[str, set[str]]:
    """model -> the harnesses its attempts came from."""
    out: dict[str, set[str]] = defaultdict(set)
    for p in rollouts:
        model = parse_rollout_path(p).model
        out[model] |= {rec.get("harness", OWN) for rec in read_attempts(p)}
    return dict(out)


def marks(by_model: dict[str, set[str]]) -> dict[str, str]:
    """model -> its mark (none for a model whose attempts all came from horizon's harness)."""
    return {m: " [" + "+".join(sorted(h)) + "]" for m, h in by_model.items() if h - {OWN}}


def note(by_model: dict[str, set[str]]) -> str:
    mk = marks(by_model)
    names = ", ".join(f"{ModelName.parse(m).label}{mk[m]}" for m in sorted(mk))
    return (
        f" Harness: {names} ran through Harbor's harness (eval.harness: harbor, the published Terminus-2 in "
        "Harbor's environment; [harbor+horizon]: attempts from both), marked so; every other model through "
        "horizon's own."
    )


def _marked(text: str, names: dict[str, str]) -> str:
    core, star = (text[:-2], " *") if text.endswith(" *") else (text, "")
    return core + names[core] + star if core in names else text


def mark(table: Table, by_model: dict[str, set[str]]) -> Table:
    """Mark the rows of models with attempts from another harness (a no-op when there are none)."""
    mk = marks(by_model)
    if not mk:
        return table
    names = {**{m: s for m, s in mk.items()}, **{ModelName.parse(m).label: s for m, s in mk.items()}}
    table.caption += note(by_model)
    table.columns = [_marked(c, names) for c in table.columns]
    table.blocks = [
        (_marked(heading, names), [(g, [_marked(cells[0], names), *cells[1:]]) for g, cells in rows])
        for heading, rows in table.blocks
    ]
    for row in table.tidy:
        if "model" in row:
            row["harness"] = "+".join(sorted(by_model.get(row["model"], {OWN})))
    return table
