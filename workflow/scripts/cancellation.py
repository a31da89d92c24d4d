from horizon.io import setup_logging
from horizon.report.tables import write_cancellation

setup_logging(snakemake.log[0])
p = snakemake.params
write_cancellation(
    list(snakemake.input.rollouts),
    dict(zip(p.benches, snakemake.input.manifests)),
    p.a,
    p.b,
    p.benches,
    p.eval,
    p.report,
    snakemake.output,
)
