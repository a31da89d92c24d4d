from horizon.data.sources import download
from horizon.io import setup_logging

setup_logging(snakemake.log[0])
download(
    source=snakemake.params.source,
    out_dir=snakemake.output[0].rsplit("/", 1)[0],
    configs=snakemake.params.configs,
    config_patterns=snakemake.params.patterns,
    revision=snakemake.params.revision,
)
