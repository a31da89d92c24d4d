# Between normalize and tokenize, per source ({D}): trajectory quality (TOR, our reconstruction, and
# the corpus statistics), and, when a filter is on, the training corpus that tokenize reads.


rule quality:
    """TOR per trajectory and the corpus statistics: one streaming pass, no tokenizer."""
    input:
        trajectories="{D}/corpus/trajectories.parquet",
        stats="{D}/corpus/stats.json",
    output:
        quality="{D}/corpus/quality.parquet",
        statistics="{D}/corpus/statistics.json",
    log:
        "{D}/logs/quality.log",
    benchmark:
        dtiming("corpus", "quality")
    params:
        quality=config["quality"],
    script:
        f"{SCRIPTS}/quality.py"


if FILTERS_ON:

    rule filter_corpus:
        """The training corpus: the normalized trajectories minus every filter's removals (counted)."""
        input:
            trajectories="{D}/corpus/trajectories.parquet",
            quality="{D}/corpus/quality.parquet",
            common=common_tasks_input(),
        output:
            trajectories="{D}/corpus/train/trajectories.parquet",
            removed="{D}/corpus/train/removed.parquet",
            stats="{D}/corpus/train/stats.json",
        log:
            "{D}/logs/filter_corpus.log",
        benchmark:
            dtiming("corpus", "filter_corpus")
        params:
            source=lambda wc: source_of(wc) or "corpus",
            per_task=config["corpus"]["per_task"],
            task_key=config["corpus"]["task_key"],
            common=lambda wc: {
                s or "corpus": [f"{root(s)}/corpus/trajectories.parquet", []]
                for s in SOURCES
                if config["corpus"]["common_tasks"]
            },
        script:
            f"{SCRIPTS}/filter_corpus.py"
