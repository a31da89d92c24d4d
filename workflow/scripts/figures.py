from horizon.io import setup_logging
from horizon.report.figures import write_figures

setup_logging(snakemake.log[0])
p = snakemake.params
write_figures(
    list(snakemake.input.rollouts),
    dict(zip(p.benches, snakemake.input.manifests)),
    p.models,
    p.benches,
    p.eval,
    p.report,
    snakemake.output.passk,
    snakemake.output.heatmap,
    snakemake.output.episodes,
)
