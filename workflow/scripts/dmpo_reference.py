from horizon.dmpo.ref_logprobs import compute_reference
from horizon.io import read_json, setup_logging

# the reference is the policy itself (base: the student's weights)
setup_logging(snakemake.log[0])
student = read_json(snakemake.input.student)
compute_reference(
    snakemake.input.pairs,
    student["model"] if snakemake.params.policy == "base" else snakemake.input.model,
    snakemake.output[0],
    chunk=snakemake.params.chunk,
)
