from horizon.eval.collect.corpus import collect, collect_with_teacher
from horizon.eval.sandbox import toolchain
from horizon.io import setup_logging

setup_logging(snakemake.log[0])
c = snakemake.params.collect
capture = snakemake.params.capture  # eval.capture and its bound: the harness's terminal, as in rollouts
with toolchain.shared() as tools:
    options = {"toolchain": tools, **snakemake.params.options}
    if c.get("teacher"):  # a real teacher (an OpenAI-compatible chat endpoint, or vllm serve)
        collect_with_teacher(
            c,
            snakemake.input.tasks,
            snakemake.input.template,
            snakemake.output[0],
            snakemake.params.sandbox,
            options,
            snakemake.params.seed,
            snakemake.log[0],
            capture=capture,
        )
    else:
        collect(
            tasks_json=snakemake.input.tasks,
            template_path=snakemake.input.template,
            out_path=snakemake.output[0],
            variants=c["variants"],
            sandbox=snakemake.params.sandbox,
            concurrency=c["concurrency"],
            seed=snakemake.params.seed,
            sandbox_options=options,
            style=c["style"],
            capture=capture,
        )
