from horizon.io import read_json, setup_logging
from horizon.launch import train_model
from horizon.train import TrainSpec

setup_logging(snakemake.log[0])
student = read_json(snakemake.input.student)
train_model(
    TrainSpec(
        name=f"single-K{snakemake.params.horizon}",
        model_init=student["model"],
        tokenizer=student["tokenizer"],
        token_shards=list(snakemake.input.tokens),
        horizon=snakemake.params.horizon,
        output=snakemake.output[0],
        checkpoints=snakemake.params.checkpoints,
        train=snakemake.params.train,
        seed=snakemake.params.seed,
        exclude=snakemake.input.heldout,
    ),
    threads=snakemake.threads,
    log_path=snakemake.log[0],
)
