from pathlib import Path

from horizon.io import read_json, setup_logging
from horizon.launch import train_model
from horizon.train import TrainSpec

setup_logging(snakemake.log[0])
student = read_json(snakemake.input.student)
train_model(
    TrainSpec(
        name=Path(snakemake.output[0]).name,
        model_init=snakemake.input.theta1,  # weights only: fresh optimizer and schedule
        tokenizer=student["tokenizer"],
        token_shards=list(snakemake.input.tokens),
        horizon=snakemake.params.horizon,  # supervise tokens 1..H2
        output=snakemake.output[0],
        checkpoints=snakemake.params.checkpoints,
        train=snakemake.params.train,
        seed=snakemake.params.seed,
        include=snakemake.input.subset,
    ),
    threads=snakemake.threads,
    log_path=snakemake.log[0],
)
