# Corpus stages: download -> normalize (+ the student and, for the demo, a collected corpus).


rule download:
    """Fetch the chosen configs of a hub dataset (or reference a local file/directory)."""
    input:
        corpus_source_input(),
    output:
        f"{R}/corpus/raw/manifest.json",
    params:
        source=config["corpus"]["source"],
        configs=config["corpus"]["configs"],
        patterns=config["corpus"]["config_patterns"],
        revision=config["corpus"]["revision"],
    log:
        f"{R}/logs/download.log",
    localrule: True
    conda:
        f"{ENVS}/data.yaml"
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
    params:
        confirmation=config["corpus"]["confirmation_pattern"],
    log:
        f"{R}/logs/normalize.log",
    threads: 1
    resources:
        mem_mb=res("normalize", "mem_mb", 8000),
        runtime=res("normalize", "runtime", 240),
    conda:
        f"{ENVS}/data.yaml"
    script:
        f"{SCRIPTS}/normalize.py"


rule student:
    """Resolve the student (model + tokenizer) to a local directory; fetch it once if it is a hub id."""
    input:
        student_build_output(),
    output:
        STUDENT,
    params:
        model=config["student"]["model"],
        revision=config["student"]["revision"],
        tokenizer=config["student"]["tokenizer"],
    log:
        f"{R}/logs/student.log",
    localrule: True
    conda:
        f"{ENVS}/data.yaml"
    script:
        f"{SCRIPTS}/student.py"


if config["student"].get("build"):

    rule build_student:
        """Tests and demo: a BPE trained on the corpus and a random-init tiny Qwen3, built offline."""
        input:
            f"{R}/corpus/trajectories.parquet",
        output:
            directory(config["student"]["model"]),
        params:
            build=config["student"]["build"],
            seed=config["seed"],
        log:
            f"{R}/logs/build_student.log",
        conda:
            f"{ENVS}/train.yaml"
        script:
            f"{SCRIPTS}/build_student.py"


if config["corpus"].get("collect"):

    rule collect_corpus:
        """The demo's corpus: the scripted teacher solves the bundled tasks through the real harness."""
        input:
            tasks=f"{R}/benchmarks/{config['corpus']['collect']['tasks']}/tasks.json",
            template=config["eval"]["prompt_template"] or [],
        output:
            config["corpus"]["source"],
        params:
            collect=config["corpus"]["collect"],
            sandbox=config["eval"]["sandbox"],
            options=config["eval"]["sandbox_options"],
            seed=config["seed"],
        log:
            f"{R}/logs/collect_corpus.log",
        threads: config["corpus"]["collect"]["concurrency"]
        conda:
            f"{ENVS}/rollout.yaml"
        script:
            f"{SCRIPTS}/collect.py"
