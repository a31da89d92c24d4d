from horizon.grid import TOR_SELECTIONS
from horizon.io import setup_logging
from horizon.score.select import write_subset, write_tor_subset

setup_logging(snakemake.log[0])
p = snakemake.params
if p.selection in TOR_SELECTIONS:  # by trajectory quality: no scores needed
    write_tor_subset(snakemake.input.pool, snakemake.input.quality, p.selection, p.rho, snakemake.output[0])
else:
    write_subset(
        snakemake.input.scores, selection=p.selection, rho=p.rho, seed=p.seed, out_path=snakemake.output[0]
    )
