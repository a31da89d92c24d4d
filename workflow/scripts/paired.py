from horizon import report as rp
from horizon.io import atomic_path, setup_logging

setup_logging(snakemake.log[0])
p = snakemake.params
cells = rp.load_cells(
    list(snakemake.input.rollouts),
    dict(zip(p.benches, snakemake.input.manifests)),
    p.eval,
    p.report,
    [p.a, p.b],
)
text = "\n".join(rp.paired_markdown(cells[(p.a, b)], cells[(p.b, b)]) for b in p.benches)
with atomic_path(snakemake.output[0]) as tmp:
    tmp.write_text(text)
