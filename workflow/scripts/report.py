from horizon.io import setup_logging
from horizon.report import write_table

setup_logging(snakemake.log[0])
p, i = snakemake.params, snakemake.input
write_table(
    p.table,
    outputs=snakemake.output,
    rollouts=list(i.get("rollouts", [])),
    manifests=dict(zip(p.get("benches", []), i.get("manifests", []))),
    models=p.get("models", []),
    benches=p.get("benches", []),
    eval_cfg=p.get("eval"),
    report_cfg=p.get("report"),
    seed=p.get("seed", 0),
    summary=i.get("summary"),
    model_dirs=list(i.get("models", [])),
    h1=p.get("h1", 0),
)
