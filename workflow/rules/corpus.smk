# Corpus stages: download -> normalize (+ the student and, for the demo, a collected corpus).


rule download:
    """Fetch the chosen configs of a hub dataset (or reference a local file/directory)."""
    input:
        corpus_source_input(),
    output:
        f"{R}/corpus/raw/manifest.json",
    log:
        f"{R}/logs/download.log",
    benchmark:
        timing("corpus", "download")
    localrule: True
    params:
        source=config["corpus"]["source"],
        configs=config["corpus"]["configs"],
        patterns=config["corpus"]["config_patterns"],
        revision=config["corpus"]["revision"],
    script:
        f"{SCRIPTS}/download.py"


rule normalize:
    """Completed trajectories once each; everything else in quarantine with a reason."""
    input:
        f"{R}/corpus/raw/manifest.json",
    output:
        trajectories=f"{R}/corpus/trajectories.parquet",
        quarantine=f"{R}/corpus/quarantine.parquet",
        stats=f"{R}/corpus/stats.json",
    log:
        f"{R}/logs/normalize.log",
    benchmark:
        timing("corpus", "normalize")
    threads: 1
    params:
        confirmation=config["corpus"]["confirmation_pattern"],
    script:
        f"{SCRIPTS}/normalize.py"


rule student:
    """Resolve the student (model + tokenizer) to a local directory; fetch it once if it is a hub id."""
    input:
        student_build_output(),
    output:
        STUDENT,
    log:
        f"{R}/logs/student.log",
    benchmark:
        timing("corpus", "student")
    localrule: True
    params:
        model=config["student"]["model"],
        revision=config["student"]["revision"],
        tokenizer=config["student"]["tokenizer"],
    script:
        f"{SCRIPTS}/student.py"


if config["student"].get("build"):

    rule build_student:
        """Tests and demo: a BPE trained on the corpus and a random-init tiny Qwen3, built offline."""
        input:
            f"{R}/corpus/trajectories.parquet",
        output:
            directory(config["student"]["model"]),
        log:
            f"{R}/logs/build_student.log",
        benchmark:
            timing("corpus", "build_student")
        params:
            build=config["student"]["build"],
            seed=config["seed"],
        script:
            f"{SCRIPTS}/build_student.py"


if config["corpus"].get("collect"):

    rule collect_corpus:
        """The demo's corpus: the scripted teacher solves the bundled tasks through the real harness."""
        input:
            tasks=f"{R}/benchmarks/{config['corpus']['collect']['tasks']}/tasks.json",
            template=prompt_template() if config["eval"]["prompt_template"] else [],
        output:
            config["corpus"]["source"],
        log:
            f"{R}/logs/collect_corpus.log",
        benchmark:
            timing("corpus", "collect_corpus")
        threads: config["corpus"]["collect"]["concurrency"]
        params:
            collect=config["corpus"]["collect"],
            sandbox=config["eval"]["sandbox"],
            options=config["eval"]["sandbox_options"],
            seed=config["seed"],
        script:
            f"{SCRIPTS}/collect.py"
