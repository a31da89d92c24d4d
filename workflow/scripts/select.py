from horizon.io import setup_logging
from horizon.score.select import write_subset

setup_logging(snakemake.log[0])
write_subset(
    snakemake.input.scores,
    selection=snakemake.params.selection,
    rho=snakemake.params.rho,
    seed=snakemake.params.seed,
    out_path=snakemake.output[0],
)
