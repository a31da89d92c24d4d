from horizon.dmpo.pairs import build_pairs
from horizon.io import read_json, setup_logging

setup_logging(snakemake.log[0])
p = snakemake.params
build_pairs(
    list(snakemake.input.rollouts),
    tokenizer_dir=read_json(snakemake.input.student)["tokenizer"],
    out_pairs=snakemake.output.pairs,
    out_summary=snakemake.output.summary,
    policy=p.policy,
    task_set=p.task_set,
    pairs_per_task=p.pairs_per_task,
    seed=p.seed,
)
