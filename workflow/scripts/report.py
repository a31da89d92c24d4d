from horizon.io import setup_logging
from horizon.report.corpus import corpus_sources
from horizon.report.tables import TableInputs, write_table

setup_logging(snakemake.log[0])
p, i = snakemake.params, snakemake.input
write_table(
    p.table,
    outputs=snakemake.output,
    inputs=TableInputs(
        rollouts=list(i.get("rollouts", [])),
        manifests=dict(zip(p.benches, i.get("manifests", []))),
        models=p.models,
        benches=p.benches,
        eval_cfg=p.eval,
        report_cfg=p.report,
        seed=p.seed,
        summary=i.get("summary"),
        model_dirs=list(i.get("models", [])),
        h1=p.h1,
        sources=corpus_sources(
            p.get("source_names", []),
            i.get("statistics", []),
            i.get("lengths", []),
            i.get("quality", []),
            i.get("train_stats", []),
        ),
        source_horizons=p.get("source_horizons", []),
        hygiene=list(zip(p.get("hygiene_sources", []), i.get("hygiene", []))),
    ),
)
