from horizon.io import setup_logging
from horizon.synth.workflow import run_synth

setup_logging(snakemake.log[0])
run_synth(
    snakemake.params.synth,
    snakemake.params.prompts,
    snakemake.params.out,
    snakemake.params.sandbox,
    snakemake.params.options,
)
