from horizon.data.decontam import decontaminate
from horizon.io import setup_logging

setup_logging(snakemake.log[0])
d = snakemake.params.decontam
decontaminate(
    snakemake.input.trajectories,
    dict(zip(snakemake.params.benches, snakemake.input.benchmarks)),
    snakemake.output.flagged,
    snakemake.output.stats,
    n=d["n"],
    min_matches=d["min_matches"],
    fields=d["fields"],
    corpus_text=d["corpus_text"],
    template=snakemake.input.get("template") or None,
)
