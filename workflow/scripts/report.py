from horizon import report as rp
from horizon.io import setup_logging

setup_logging(snakemake.log[0])
p = snakemake.params
out = snakemake.output
if p.table == "cost":
    rp.cost(list(snakemake.input.models), p.h1).write(out.md, out.csv, out.tex)
else:
    manifests = dict(zip(p.benches, snakemake.input.manifests))
    cells = rp.load_cells(list(snakemake.input.rollouts), manifests, p.eval, p.report, p.models)
    if p.table == "reliability":
        t = rp.reliability(cells, p.models, p.benches, p.eval, p.report, seed=p.seed)
    elif p.table == "behaviour":
        t = rp.behaviour(cells, p.models, p.benches, p.eval, p.report)
    elif p.table == "tasks":
        t = rp.tasks_table(cells, p.models, p.benches, p.eval)
    elif p.table == "budget":
        t = rp.budget(cells, snakemake.input.summary, p.benches, p.eval)
    else:
        raise ValueError(f"unknown table {p.table}")
    t.write(out.md, out.csv, out.tex)
