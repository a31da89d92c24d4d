from pathlib import Path

from horizon.dmpo.launch import DMPOSpec, train_dmpo
from horizon.dmpo.ref_logprobs import reference_meta
from horizon.dmpo.training_tasks import rollout_hours
from horizon.io import read_json, setup_logging

# DMPO from the policy's weights (fresh optimizer and schedule); the reference log-probs were computed under them
setup_logging(snakemake.log[0])
student = read_json(snakemake.input.student)
p = snakemake.params
name = Path(snakemake.output[0]).name
preference_hours = (
    rollout_hours(snakemake.input.timing) + float(reference_meta(snakemake.input.reference)["seconds"]) / 3600
)
train_dmpo(
    DMPOSpec(
        name=name,
        model_init=student["model"] if p.policy == "base" else snakemake.input.model,
        tokenizer=student["tokenizer"],
        pairs=snakemake.input.pairs,
        reference=snakemake.input.reference,
        output=snakemake.output[0],
        checkpoints=f"{p.checkpoints}/{name}",
        train=p.train,
        seed=p.seed,
        beta=p.dmpo["beta"],
        gamma=p.dmpo["gamma"],
        chunk=p.chunk,
        extra_timing={"policy": p.policy, "preference_hours": preference_hours},
    ),
    threads=snakemake.threads,
    log_path=snakemake.log[0],
)
