# Training: single-stage SFT at every horizon K, and refinement from theta1 = single-K{H1}.
# Checkpoints are protected: a rerun never deletes a trained model without being told to.
# Resumable state lives in results/checkpoints/<model>/ (not an output, so a killed job keeps it).


rule train_single:
    """Full-parameter SFT on the first K tokens of every trajectory (loss on assistant tokens)."""
    input:
        tokens=TOKEN_SHARDS,
        horizon=f"{R}/horizons/K{{K}}.parquet",
        heldout=f"{R}/horizons/heldout.parquet",
        student=STUDENT,
    output:
        protected(directory(f"{R}/models/single-K{{K}}")),
    params:
        horizon=lambda wc: int(wc.K),
        train=config["train"],
        seed=config["seed"],
        checkpoints=lambda wc: f"{R}/checkpoints/single-K{wc.K}",
    log:
        f"{R}/logs/train/single-K{{K}}.log",
    threads: res("train", "threads", 2)
    resources:
        mem_mb=res("train", "mem_mb", 16000),
        runtime=res("train", "runtime", 2880),
    conda:
        f"{ENVS}/train.yaml"
    container:
        GPU_CONTAINER
    script:
        f"{SCRIPTS}/train.py"


rule refine:
    """Continue from theta1's weights on tokens 1..H2 of the kept trajectories."""
    input:
        tokens=TOKEN_SHARDS,
        subset=f"{R}/subsets/H{{h2}}/{{selection}}-{{pct}}.parquet",
        theta1=f"{R}/models/single-K{H1}",
        student=STUDENT,
    output:
        protected(directory(f"{R}/models/refine-H{{h2}}-{{selection}}-{{pct}}")),
    params:
        horizon=lambda wc: int(wc.h2),
        train=config["train"],
        seed=config["seed"],
        checkpoints=lambda wc: f"{R}/checkpoints/refine-H{wc.h2}-{wc.selection}-{wc.pct}",
    log:
        f"{R}/logs/train/refine-H{{h2}}-{{selection}}-{{pct}}.log",
    threads: res("train", "threads", 2)
    resources:
        mem_mb=res("train", "mem_mb", 16000),
        runtime=res("train", "runtime", 2880),
    conda:
        f"{ENVS}/train.yaml"
    container:
        GPU_CONTAINER
    script:
        f"{SCRIPTS}/refine.py"
