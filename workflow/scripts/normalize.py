from horizon.data.normalize import normalize
from horizon.io import setup_logging

setup_logging(snakemake.log[0])
normalize(
    manifest_path=snakemake.input[0],
    trajectories_path=snakemake.output.trajectories,
    quarantine_path=snakemake.output.quarantine,
    stats_path=snakemake.output.stats,
    confirmation_pattern=snakemake.params.confirmation,
)
