from horizon.io import setup_logging
from horizon.student import resolve

setup_logging(snakemake.log[0])
resolve(
    model=snakemake.params.model,
    revision=snakemake.params.revision,
    tokenizer=snakemake.params.tokenizer,
    out_path=snakemake.output[0],
)
