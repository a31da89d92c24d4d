from horizon.eval.agent.extract import extract_from_parquet
from horizon.io import setup_logging

setup_logging(snakemake.log[0])
extract_from_parquet(
    snakemake.input[0], snakemake.output[0], snakemake.params.confirmation, env=snakemake.params.env
)
