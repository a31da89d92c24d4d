from horizon.eval.tasks.benchmark import write_manifest
from horizon.io import setup_logging

setup_logging(snakemake.log[0])
b = snakemake.params.bench
root = b.get("path")
if root is None:  # a hub dataset of task directories, fetched once (login node)
    from huggingface_hub import snapshot_download

    root = snapshot_download(
        repo_id=b["hf"],
        repo_type="dataset",
        revision=b["revision"],
        local_dir=snakemake.params.dest + "/tasks",
    )
write_manifest(root, b["format"], snakemake.output[0], only=b.get("tasks"), name=snakemake.params.name)
