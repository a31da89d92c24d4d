from horizon.io import setup_logging
from horizon.student import build_tiny

setup_logging(snakemake.log[0])
build_tiny(snakemake.input[0], snakemake.output[0], snakemake.params.build, seed=snakemake.params.seed)
