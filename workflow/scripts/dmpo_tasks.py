from horizon.dmpo.training_tasks import training_manifest
from horizon.io import setup_logging

setup_logging(snakemake.log[0])
training_manifest(
    snakemake.params.tasks,
    dest=snakemake.params.dest,
    out=snakemake.output[0],
    benchmark_manifests=dict(zip(snakemake.params.benches, snakemake.input.manifests)),
)
