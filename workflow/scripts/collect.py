from horizon.eval.collect import collect
from horizon.eval.sandbox import toolchain
from horizon.io import setup_logging

setup_logging(snakemake.log[0])
c = snakemake.params.collect
with toolchain.temporary() as tools:
    collect(
        tasks_json=snakemake.input.tasks,
        template_path=snakemake.input.template,
        out_path=snakemake.output[0],
        variants=c["variants"],
        sandbox=snakemake.params.sandbox,
        concurrency=c["concurrency"],
        seed=snakemake.params.seed,
        sandbox_options={"toolchain": tools, **snakemake.params.options},
        style=c["style"],
    )
