from horizon.io import setup_logging
from horizon.score.diagnostics import run

setup_logging(snakemake.log[0])
p = snakemake.params
d = p.diagnostics
run(
    models=dict(zip(p.horizons, snakemake.input.models)),
    heldout_path=snakemake.input.heldout,
    pool_paths=dict(zip(p.h2s, snakemake.input.pools)),
    subset_paths={tuple(s): path for s, path in zip(p.subsets, snakemake.input.subsets)},
    token_shards=list(snakemake.input.tokens),
    h1=p.h1,
    out_bias=snakemake.output.bias,
    out_curves=snakemake.output.curves,
    out_local_png=snakemake.output.local,
    out_subsets_png=snakemake.output.subsets,
    window=d["window"],
    max_trajectories=d["max_trajectories"],
    max_tokens=d["max_tokens"],
    chunk=p.score["chunk"],
    seed=p.seed,
)
