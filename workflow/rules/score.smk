# Continuation scoring under theta1, subset selection, and the horizon diagnostics.


rule score:
    """Mean log-prob under theta1 of each pool trajectory's assistant tokens in (H1, H2]."""
    input:
        pool=f"{R}/horizons/pool-H{{h1}}-{{h2}}.parquet",
        tokens=TOKEN_SHARDS,
        theta1=f"{R}/models/single-K{{h1}}",
    output:
        f"{R}/scores/H{{h1}}-{{h2}}/shard-{{i}}.parquet",
    params:
        shards=SCORE_SHARDS,
        h1=lambda wc: int(wc.h1),
        h2=lambda wc: int(wc.h2),
        score=config["score"],
    log:
        f"{R}/logs/score/H{{h1}}-{{h2}}/shard-{{i}}.log",
    threads: res("score", "threads", 2)
    resources:
        mem_mb=res("score", "mem_mb", 16000),
        runtime=res("score", "runtime", 600),
    conda:
        f"{ENVS}/train.yaml"
    container:
        GPU_CONTAINER
    script:
        f"{SCRIPTS}/score.py"


rule merge_scores:
    input:
        expand(f"{R}/scores/H{{{{h1}}}}-{{{{h2}}}}/shard-{{i:03d}}.parquet", i=range(SCORE_SHARDS)),
    output:
        f"{R}/scores/H{{h1}}-{{h2}}/scores.parquet",
    log:
        f"{R}/logs/score/H{{h1}}-{{h2}}/merge.log",
    localrule: True
    conda:
        f"{ENVS}/data.yaml"
    script:
        f"{SCRIPTS}/merge_scores.py"


rule select:
    """Top / Bottom / Random ceil(rho*n) of the scored pool (or all of it)."""
    input:
        scores=f"{R}/scores/H{H1}-{{h2}}/scores.parquet",
        pool=f"{R}/horizons/pool-H{H1}-{{h2}}.parquet",
    output:
        f"{R}/subsets/H{{h2}}/{{selection}}-{{pct}}.parquet",
    params:
        selection=lambda wc: wc.selection,
        rho=lambda wc: int(wc.pct) / 100,
        seed=config["seed"],
    log:
        f"{R}/logs/select/H{{h2}}-{{selection}}-{{pct}}.log",
    localrule: True
    conda:
        f"{ENVS}/data.yaml"
    script:
        f"{SCRIPTS}/select.py"


rule subset_summary:
    input:
        subsets=[f"{R}/subsets/H{s.h2}/{s.name}.parquet" for s in SUBSETS],
        pools=[f"{R}/horizons/pool-H{H1}-{h2}.parquet" for h2 in H2S],
    output:
        f"{R}/subsets/summary.csv",
    params:
        subsets=[(s.h2, s.selection, s.pct) for s in SUBSETS],
    log:
        f"{R}/logs/select/summary.log",
    localrule: True
    conda:
        f"{ENVS}/data.yaml"
    script:
        f"{SCRIPTS}/subset_summary.py"


rule diagnostics:
    """Per-step log-likelihood curves, the bias proxy B(H) and local difficulty (our reconstruction)."""
    input:
        models=[f"{R}/models/single-K{k}" for k in HORIZONS],
        heldout=f"{R}/horizons/heldout.parquet",
        pools=[f"{R}/horizons/pool-H{H1}-{h2}.parquet" for h2 in H2S],
        subsets=[f"{R}/subsets/H{s.h2}/{s.name}.parquet" for s in SUBSETS],
        tokens=TOKEN_SHARDS,
    output:
        bias=f"{R}/diagnostics/bias.csv",
        curves=f"{R}/diagnostics/curves.parquet",
        local=report(f"{R}/figures/local_loglik.png", category="Diagnostics"),
        subsets=report(f"{R}/figures/subset_difficulty.png", category="Diagnostics"),
    params:
        horizons=HORIZONS,
        diagnostics=config["diagnostics"],
        h1=H1,
        h2s=H2S,
        subsets=[(s.h2, s.selection, s.pct) for s in SUBSETS],
        score=config["score"],
        seed=config["seed"],
    log:
        f"{R}/logs/diagnostics.log",
    threads: res("score", "threads", 2)
    resources:
        mem_mb=res("score", "mem_mb", 16000),
        runtime=res("score", "runtime", 600),
    conda:
        f"{ENVS}/train.yaml"
    container:
        GPU_CONTAINER
    script:
        f"{SCRIPTS}/diagnostics.py"
