# Tables and figures: the single target users ask for. Each table builds only what it needs.
# With report.allow_partial, they are made from the rollouts that exist (partial rows are marked).

MANIFESTS = [f"{R}/benchmarks/{b}/tasks.json" for b in G.benches]
EVAL_PARAMS = dict(eval=config["eval"], report=config["report"], seed=config["seed"], benches=G.benches)
SUBSET_MODELS = [str(s.model) for s in G.subsets]

# One rule per table, all from this definition: its inputs and the models it shows (a builder of
# the same name in horizon.report.tables makes it).
TABLES = {
    "reliability": dict(input=dict(rollouts=rollouts(), manifests=MANIFESTS), models=MODELS),
    "cost": dict(input=dict(models=trained_models()), models=[]),
    "behaviour": dict(input=dict(rollouts=rollouts(), manifests=MANIFESTS), models=MODELS),
    "budget": dict(
        input=dict(
            rollouts=[r for m in SUBSET_MODELS for r in rollouts(model=m)],
            manifests=MANIFESTS,
            summary=f"{R}/subsets/summary.csv",
        ),
        models=SUBSET_MODELS,
    ),
    "tasks": dict(input=dict(rollouts=rollouts(), manifests=MANIFESTS), models=MODELS),
    # the paper's layouts: Table 1 (hours beside Rel>=1), Tables 11-12, Table 8 (episodes per task)
    "main": dict(
        input=dict(rollouts=rollouts(), manifests=MANIFESTS, models=trained_models()),
        models=MODELS,
    ),
    "benchmarks": dict(input=dict(rollouts=rollouts(), manifests=MANIFESTS), models=MODELS),
    "episodes": dict(
        input=dict(rollouts=rollouts(), manifests=MANIFESTS),
        models=MODELS,
        caption="../report/episodes_table.rst",  # episodes.rst is the histogram's
    ),
}
# Per source (docs/stages/quality.md, docs/stages/teachers.md): the files that describe its corpus.
CORPUS_INPUT = dict(
    statistics=[f"{root(s)}/corpus/statistics.json" for s in SOURCES],
    lengths=[f"{root(s)}/horizons/K{G.horizons_of(s)[0]}.parquet" for s in SOURCES],
    quality=[f"{root(s)}/corpus/quality.parquet" for s in SOURCES],
    train_stats=[f"{root(s)}/corpus/train/stats.json" for s in SOURCES] if FILTERS_ON else [],
)
CORPUS_PARAMS = dict(source_names=SOURCE_LABELS, source_horizons=list(G.source_horizons))
TABLES["corpus"] = dict(input=CORPUS_INPUT, models=[], params=CORPUS_PARAMS)
if G.compared:  # a teacher comparison: every source's students at the compared horizons
    TEACHER_MODELS = [str(ModelName.single(k, s)) for s in [None, *G.compared] for k in G.source_horizons]
    TABLES["teachers"] = dict(
        input=dict(
            **CORPUS_INPUT,
            rollouts=[r for m in TEACHER_MODELS for r in rollouts(model=m)],
            manifests=MANIFESTS,
        ),
        models=TEACHER_MODELS,
        params=CORPUS_PARAMS,
    )


# Every table's caption notes how clean the training data was (decontamination, judge), per source.
HYGIENE = (
    [f"{root(s)}/corpus/train/stats.json" for s in SOURCES] if DECONTAM["enabled"] or JUDGE["enabled"] else []
)


for _table, _spec in TABLES.items():

    rule:
        name:
            f"table_{_table}"
        input:
            **_spec["input"],
            hygiene=HYGIENE,
        output:
            md=report(
                f"{R}/tables/{_table}.md",
                category="Tables",
                caption=_spec.get("caption", f"../report/{_table}.rst"),
            ),
            csv=f"{R}/tables/{_table}.csv",
            tex=f"{R}/tables/{_table}.tex",
        log:
            f"{R}/logs/report/{_table}.log",
        benchmark:
            timing("report", f"report/{_table}")
        localrule: True
        params:
            **EVAL_PARAMS,
            **_spec.get("params", {}),
            table=_table,
            models=_spec["models"],
            h1=G.h1,
            hygiene_sources=SOURCE_LABELS,
        script:
            f"{SCRIPTS}/report.py"


rule figures:
    input:
        rollouts=rollouts(),
        manifests=MANIFESTS,
    output:
        passk=[
            report(
                f"{R}/figures/passk-{b}.png",
                category="Figures",
                caption="../report/passk.rst",
            )
            for b in G.benches
        ],
        heatmap=[
            report(
                f"{R}/figures/tasks-{b}.png",
                category="Figures",
                caption="../report/heatmap.rst",
            )
            for b in G.benches
        ],
        episodes=report(
            f"{R}/figures/episodes.png",
            category="Figures",
            caption="../report/episodes.rst",
        ),
    log:
        f"{R}/logs/report/figures.log",
    benchmark:
        timing("report", "report/figures")
    localrule: True
    params:
        **EVAL_PARAMS,
        models=MODELS,
    script:
        f"{SCRIPTS}/figures.py"


rule corpus_figures:
    """TOR distribution, turns per trajectory and the most frequent commands of every source's corpus."""
    input:
        statistics=CORPUS_INPUT["statistics"],
        lengths=CORPUS_INPUT["lengths"],
    output:
        report(f"{R}/figures/corpus.png", category="Figures", caption="../report/corpus_figure.rst"),
    log:
        f"{R}/logs/report/corpus_figures.log",
    benchmark:
        timing("report", "report/corpus_figures")
    localrule: True
    params:
        source_names=SOURCE_LABELS,
    script:
        f"{SCRIPTS}/corpus_figures.py"


rule paired:
    input:
        rollouts=lambda wc: rollouts(model=wc.a) + rollouts(model=wc.b),
        manifests=MANIFESTS,
    output:
        report(
            f"{R}/tables/paired-{{a}}-vs-{{b}}.md",
            category="Tables",
            caption="../report/paired.rst",
        ),
    log:
        f"{R}/logs/report/paired-{{a}}-vs-{{b}}.log",
    benchmark:
        timing("report", "report/paired-{a}-vs-{b}")
    wildcard_constraints:  # `{a}-vs-{b}` splits one way only: the grid's own names
        a=GRID_MODELS,
        b=GRID_MODELS,
    localrule: True
    params:
        **EVAL_PARAMS,
        a=lambda wc: wc.a,
        b=lambda wc: wc.b,
    script:
        f"{SCRIPTS}/paired.py"


rule cancellation:
    """Appendix B.2 between two models: tasks better / worse / unchanged, attempts gained and lost."""
    input:
        rollouts=lambda wc: rollouts(model=wc.a) + rollouts(model=wc.b),
        manifests=MANIFESTS,
    output:
        md=report(
            f"{R}/tables/cancellation-{{a}}-vs-{{b}}.md",
            category="Tables",
            caption="../report/cancellation.rst",
        ),
        csv=f"{R}/tables/cancellation-{{a}}-vs-{{b}}.csv",
        tex=f"{R}/tables/cancellation-{{a}}-vs-{{b}}.tex",
    log:
        f"{R}/logs/report/cancellation-{{a}}-vs-{{b}}.log",
    benchmark:
        timing("report", "report/cancellation-{a}-vs-{b}")
    wildcard_constraints:  # `{a}-vs-{b}` splits one way only: the grid's own names
        a=GRID_MODELS,
        b=GRID_MODELS,
    localrule: True
    params:
        **EVAL_PARAMS,
        a=lambda wc: wc.a,
        b=lambda wc: wc.b,
    script:
        f"{SCRIPTS}/cancellation.py"


# Manual failure classification. The export is part of the grid; the labels table waits for human
# input, so it is built only when asked for (results/tables/labels.md), from the filled copies in
# annotate.dir (editing one rebuilds it).
rule annotations:
    """The failed attempts of one model on one benchmark, with an empty label column."""
    input:
        lambda wc: rollouts(model=wc.model, bench=wc.bench),
    output:
        f"{R}/annotations/{{model}}-{{bench}}.csv",
    log:
        f"{R}/logs/report/annotations/{{model}}-{{bench}}.log",
    benchmark:
        timing("report", "report/annotations/{model}-{bench}")
    wildcard_constraints:  # `{model}-{bench}` splits one way only: the grid's own names
        model=GRID_MODELS,
        bench=GRID_BENCHES,
    localrule: True
    params:
        model=lambda wc: wc.model,
        bench=lambda wc: wc.bench,
        annotate=config["annotate"],
    script:
        f"{SCRIPTS}/annotations.py"


rule table_labels:
    """Counts and pass rates per failure class, from the filled annotation files."""
    input:
        filled=filled_annotations,
        rollouts=rollouts(),
    output:
        md=report(
            f"{R}/tables/labels.md",
            category="Tables",
            caption="../report/labels.rst",
        ),
        csv=f"{R}/tables/labels.csv",
        tex=f"{R}/tables/labels.tex",
    log:
        f"{R}/logs/report/labels.log",
    benchmark:
        timing("report", "report/labels")
    localrule: True
    params:
        annotate=config["annotate"],
    script:
        f"{SCRIPTS}/labels.py"
