from horizon.io import setup_logging
from horizon.score.scorer import merge

setup_logging(snakemake.log[0])
merge(list(snakemake.input), snakemake.output[0])
