from horizon.dmpo.training_tasks import preference_rollouts
from horizon.eval.settings import EvalSettings
from horizon.io import read_json, setup_logging

setup_logging(snakemake.log[0])
student = read_json(snakemake.input.student)
p = snakemake.params
preference_rollouts(
    policy_dir=student["model"] if p.policy == "base" else snakemake.input.model,
    tokenizer_dir=student["tokenizer"],
    tasks_json=snakemake.input.tasks,
    template_path=snakemake.input.template,
    settings=EvalSettings.from_config(p.eval),
    seed=p.seed,
    signatures=p.signatures,
    policy=p.policy,
    attempts=p.attempts,
    shard=p.shard,
    shards=p.shards,
    out_path=snakemake.output.attempts,
    timing_path=snakemake.output.timing,
)
