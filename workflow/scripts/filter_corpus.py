from pathlib import Path

from horizon.data.filters import build_training_corpus
from horizon.io import setup_logging

setup_logging(snakemake.log[0])
p = snakemake.params
build_training_corpus(
    source=p.source,
    trajectories=snakemake.input.trajectories,
    quality=snakemake.input.quality,
    out_dir=Path(snakemake.output.stats).parent,
    per_task=p.per_task,
    task_key=p.task_key,
    removal_paths=list(snakemake.input.get("removals", [])),
    common_with={name: (traj, removals) for name, (traj, removals) in p.common.items()} or None,
    reports=dict(p.reports),
    decontam_remove=p.decontam_remove,
)
