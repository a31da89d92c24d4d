from horizon.data.horizons import write_horizon
from horizon.io import setup_logging

setup_logging(snakemake.log[0])
write_horizon(list(snakemake.input), int(snakemake.wildcards.K), snakemake.output[0])
