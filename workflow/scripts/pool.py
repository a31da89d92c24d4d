from horizon.data.horizons import write_pool
from horizon.io import setup_logging

setup_logging(snakemake.log[0])
write_pool(
    snakemake.input.h1,
    snakemake.input.h2,
    snakemake.input.heldout,
    h2=int(snakemake.wildcards.h2),
    out_path=snakemake.output[0],
    rule=snakemake.params.rule,
    h1=int(snakemake.wildcards.h1),
)
