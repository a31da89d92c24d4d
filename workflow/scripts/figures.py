from horizon import report as rp
from horizon.io import setup_logging

setup_logging(snakemake.log[0])
p = snakemake.params
cells = rp.load_cells(
    list(snakemake.input.rollouts),
    dict(zip(p.benches, snakemake.input.manifests)),
    p.eval,
    p.report,
    p.models,
)
for bench, passk, heat in zip(p.benches, snakemake.output.passk, snakemake.output.heatmap):
    rp.figure_passk(cells, p.models, bench, p.eval, passk)
    rp.figure_heatmap(cells, p.models, bench, p.eval, heat)
rp.figure_episodes(list(snakemake.input.rollouts), p.models, snakemake.output.episodes)
