# Continuation scoring under theta1, subset selection, and the horizon diagnostics.


rule score:
    """Mean log-prob under theta1 of each pool trajectory's assistant tokens in (H1, H2]."""
    input:
        pool=f"{R}/horizons/pool-H{{h1}}-{{h2}}.parquet",
        tokens=TOKEN_SHARDS,
        theta1=f"{R}/models/{G.theta1}",
    output:
        f"{R}/scores/H{{h1}}-{{h2}}/shard-{{i}}.parquet",
    log:
        f"{R}/logs/score/H{{h1}}-{{h2}}/shard-{{i}}.log",
    benchmark:
        timing("score", "score/H{h1}-{h2}/shard-{i}")
    priority: PRIORITY_CHAIN
    params:
        shards=SCORE_SHARDS,
        h1=lambda wc: int(wc.h1),
        h2=lambda wc: int(wc.h2),
        score=config["score"],
    script:
        f"{SCRIPTS}/score.py"


rule merge_scores:
    input:
        expand(
            f"{R}/scores/H{{{{h1}}}}-{{{{h2}}}}/shard-{{i:03d}}.parquet",
            i=range(SCORE_SHARDS),
        ),
    output:
        f"{R}/scores/H{{h1}}-{{h2}}/scores.parquet",
    log:
        f"{R}/logs/score/H{{h1}}-{{h2}}/merge.log",
    benchmark:
        timing("score", "score/H{h1}-{h2}/merge")
    priority: PRIORITY_CHAIN
    localrule: True
    script:
        f"{SCRIPTS}/merge_scores.py"


rule select:
    """Top / Bottom / Random ceil(rho*n) of the scored pool (or all of it); TOR-Top / TOR-Bottom by TOR."""
    input:
        scores=lambda wc: (
            [] if wc.selection.startswith("tor-") else f"{R}/scores/H{G.h1}-{wc.h2}/scores.parquet"
        ),
        pool=f"{R}/horizons/pool-H{G.h1}-{{h2}}.parquet",
        quality=lambda wc: f"{R}/corpus/quality.parquet" if wc.selection.startswith("tor-") else [],
    output:
        f"{R}/subsets/H{{h2}}/{{selection}}-{{rho}}.parquet",
    log:
        f"{R}/logs/select/H{{h2}}-{{selection}}-{{rho}}.log",
    benchmark:
        timing("score", "select/H{h2}-{selection}-{rho}")
    priority: PRIORITY_CHAIN
    localrule: True
    params:
        selection=lambda wc: wc.selection,
        rho=lambda wc: G.subset(wc.h2, wc.selection, wc.rho).rho,  # as configured, not a rounded percentage
        seed=config["seed"],
    script:
        f"{SCRIPTS}/select.py"


rule subset_summary:
    input:
        subsets=[subset_file(s) for s in G.subsets],
        pools=[f"{R}/horizons/pool-H{G.h1}-{h2}.parquet" for h2 in G.h2s],
    output:
        f"{R}/subsets/summary.csv",
    log:
        f"{R}/logs/select/summary.log",
    benchmark:
        timing("score", "select/summary")
    localrule: True
    params:
        subsets=[(s.h2, s.selection, s.rho) for s in G.subsets],
        h2s=G.h2s,
        pool=config["score"]["pool"],
    script:
        f"{SCRIPTS}/subset_summary.py"


rule diagnostics:
    """Per-step log-likelihood curves, the bias proxy B(H) and local difficulty (our reconstruction)."""
    input:
        models=[f"{R}/models/{m}" for m in G.models if m.kind == "single" and not m.source],
        heldout=f"{R}/horizons/heldout.parquet",
        pools=[f"{R}/horizons/pool-H{G.h1}-{h2}.parquet" for h2 in G.h2s],
        subsets=[subset_file(s) for s in G.subsets],
        tokens=TOKEN_SHARDS,
    output:
        bias=f"{R}/diagnostics/bias.csv",
        curves=f"{R}/diagnostics/curves.parquet",
        local=report(f"{R}/figures/local_loglik.png", category="Diagnostics"),
        subsets=report(f"{R}/figures/subset_difficulty.png", category="Diagnostics"),
    log:
        f"{R}/logs/diagnostics.log",
    benchmark:
        timing("score", "diagnostics")
    params:
        horizons=G.horizons,
        diagnostics=config["diagnostics"],
        h1=G.h1,
        h2s=G.h2s,
        subsets=[(s.h2, s.selection, s.token) for s in G.subsets],
        score=config["score"],
        seed=config["seed"],
    script:
        f"{SCRIPTS}/diagnostics.py"
