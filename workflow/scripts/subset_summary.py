import re

from horizon.io import setup_logging
from horizon.select import summary

setup_logging(snakemake.log[0])
pools = {int(re.search(r"pool-H\d+-(\d+)\.parquet$", p).group(1)): p for p in snakemake.input.pools}
summary(snakemake.params.subsets, list(snakemake.input.subsets), pools, snakemake.output[0])
