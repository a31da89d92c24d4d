from horizon.grid import Subset
from horizon.io import setup_logging
from horizon.score.select import summary

setup_logging(snakemake.log[0])
p = snakemake.params
summary(
    [Subset(*s) for s in p.subsets],
    list(snakemake.input.subsets),
    dict(zip(p.h2s, snakemake.input.pools)),
    snakemake.output[0],
    pool_rule=p.pool,
)
