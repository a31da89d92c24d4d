from horizon.io import setup_logging
from horizon.score.scorer import score_shard

setup_logging(snakemake.log[0])
cfg = snakemake.params.score
score_shard(
    pool_path=snakemake.input.pool,
    token_shards=list(snakemake.input.tokens),
    model_dir=snakemake.input.theta1,
    out_path=snakemake.output[0],
    h1=snakemake.params.h1,
    h2=snakemake.params.h2,
    shard=int(snakemake.wildcards.i),
    n_shards=snakemake.params.shards,
    chunk=cfg["chunk"],
    batch_tokens=cfg["batch_tokens"],
    write_every=cfg["write_every"],
)
