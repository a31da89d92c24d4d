from horizon.eval.reference.environment import export_template
from horizon.io import setup_logging

setup_logging(snakemake.log[0])
export_template(snakemake.params.source, snakemake.output[0], snakemake.params.env)
