from horizon.data.tokens import tokenize_shard
from horizon.io import read_json, setup_logging

setup_logging(snakemake.log[0])
tokenize_shard(
    trajectories=snakemake.input.trajectories,
    tokenizer_path=read_json(snakemake.input.student)["tokenizer"],
    out_path=snakemake.output[0],
    shard=int(snakemake.wildcards.i),
    n_shards=snakemake.params.shards,
    batch_rows=snakemake.params.batch_rows,
    threads=snakemake.threads,
    observations=snakemake.params.observations,
    template=snakemake.input.get("template") or None,
)
