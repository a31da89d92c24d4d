from horizon.io import setup_logging
from horizon.prompts import extract_from_parquet

setup_logging(snakemake.log[0])
extract_from_parquet(snakemake.input[0], snakemake.output[0], snakemake.params.confirmation)
