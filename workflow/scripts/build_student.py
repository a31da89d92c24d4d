from horizon.data.student import build_tiny
from horizon.io import setup_logging

setup_logging(snakemake.log[0])
build_tiny(snakemake.input[0], snakemake.output[0], snakemake.params.build, seed=snakemake.params.seed)
