from horizon.eval.rollout import rollout_job
from horizon.eval.settings import EvalSettings
from horizon.io import read_json, setup_logging

setup_logging(snakemake.log[0])
student = read_json(snakemake.input.student)
model = snakemake.params.model
rollout_job(
    model_dir=student["model"] if model == "base" else snakemake.input.model,
    tokenizer_dir=student["tokenizer"],
    tasks_json=snakemake.input.tasks,
    template_path=snakemake.input.template,
    settings=EvalSettings.from_config(snakemake.params.eval),
    seed=snakemake.params.seed,
    signatures=snakemake.params.signatures,
    model=model,
    bench=snakemake.params.bench,
    repeat=snakemake.params.repeat,
    out_path=snakemake.output[0],
)
