from horizon.data.judge import JudgeSettings, run_judge
from horizon.io import setup_logging

setup_logging(snakemake.log[0])
run_judge(
    snakemake.input.trajectories,
    snakemake.input.rubric,
    snakemake.output.verdicts,
    snakemake.output.stats,
    JudgeSettings(**snakemake.params.judge),
)
