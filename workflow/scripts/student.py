from horizon.data.student import resolve
from horizon.io import setup_logging

setup_logging(snakemake.log[0])
resolve(
    model=snakemake.params.model,
    revision=snakemake.params.revision,
    tokenizer=snakemake.params.tokenizer,
    out_path=snakemake.output[0],
)
