# Serialization and horizon views: tokenize -> horizons, heldout, pool.


rule tokenize:
    """Shard i of the trajectories, serialized with the student's tokenizer (roles, turns kept)."""
    input:
        trajectories=f"{R}/corpus/trajectories.parquet",
        student=STUDENT,
    output:
        f"{R}/tokens/shard-{{i}}.parquet",
    log:
        f"{R}/logs/tokenize/shard-{{i}}.log",
    benchmark:
        timing("tokens", "tokenize/shard-{i}")
    threads: config["tokenize"]["threads"]
    params:
        shards=config["tokenize"]["shards"],
        batch_rows=config["tokenize"]["batch_rows"],
    script:
        f"{SCRIPTS}/tokenize.py"


rule horizons:
    """Per trajectory: tokens, assistant tokens and decision steps kept by horizon K."""
    input:
        TOKEN_SHARDS,
    output:
        f"{R}/horizons/K{{K}}.parquet",
    log:
        f"{R}/logs/horizons/K{{K}}.log",
    benchmark:
        timing("tokens", "horizons/K{K}")
    script:
        f"{SCRIPTS}/horizons.py"


rule heldout:
    """Long trajectories kept out of training and scoring, for the diagnostics."""
    input:
        f"{R}/horizons/K{max(G.horizons)}.parquet",
    output:
        f"{R}/horizons/heldout.parquet",
    log:
        f"{R}/logs/heldout.log",
    benchmark:
        timing("tokens", "heldout")
    params:
        min_tokens=max(G.horizons),
        n_heldout=config["split"]["heldout"],
        seed=config["seed"],
    script:
        f"{SCRIPTS}/heldout.py"


rule pool:
    """The (H1, H2) scoring pool: trajectories longer than H1, or at least H2 long (score.pool)."""
    input:
        h1=f"{R}/horizons/K{{h1}}.parquet",
        h2=f"{R}/horizons/K{{h2}}.parquet",
        heldout=f"{R}/horizons/heldout.parquet",
    output:
        f"{R}/horizons/pool-H{{h1}}-{{h2}}.parquet",
    log:
        f"{R}/logs/pool/H{{h1}}-{{h2}}.log",
    benchmark:
        timing("tokens", "pool/H{h1}-{h2}")
    params:
        rule=config["score"]["pool"],
    script:
        f"{SCRIPTS}/pool.py"
