from horizon.io import setup_logging
from horizon.report.annotations import export_failures

setup_logging(snakemake.log[0])
p = snakemake.params
export_failures(
    list(snakemake.input),
    p.model,
    p.bench,
    p.annotate["last_episodes"],
    p.annotate["screen_tail"],
    snakemake.output[0],
)
