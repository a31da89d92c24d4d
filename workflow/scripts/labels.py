from horizon.io import setup_logging
from horizon.report.annotations import write_labels

setup_logging(snakemake.log[0])
a = snakemake.params.annotate
write_labels(
    list(snakemake.input.filled),
    a["labels"],
    a["compare"],
    list(snakemake.input.rollouts),
    snakemake.output,
)
