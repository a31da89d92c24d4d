from horizon.data.horizons import write_heldout
from horizon.io import setup_logging

setup_logging(snakemake.log[0])
write_heldout(
    snakemake.input[0],
    min_tokens=snakemake.params.min_tokens,
    count=snakemake.params.n_heldout,
    seed=snakemake.params.seed,
    out_path=snakemake.output[0],
)
