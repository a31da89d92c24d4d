from horizon.data.quality import write_quality
from horizon.io import setup_logging

setup_logging(snakemake.log[0])
q = snakemake.params.quality
write_quality(
    snakemake.input.trajectories,
    snakemake.input.stats,
    snakemake.output.quality,
    snakemake.output.statistics,
    observation_commands=q["observation_commands"],
    min_identifier=q["min_identifier"],
)
