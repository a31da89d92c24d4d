from horizon.io import setup_logging
from horizon.report.corpus import corpus_figure, corpus_sources

setup_logging(snakemake.log[0])
i = snakemake.input
corpus_figure(corpus_sources(snakemake.params.source_names, i.statistics, i.lengths), snakemake.output[0])
