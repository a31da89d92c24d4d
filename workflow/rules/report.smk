# Tables and figures: the single target users ask for. Each table builds only what it needs.
# With report.allow_partial, they are made from the rollouts that exist (partial rows are marked).

MANIFESTS = [f"{R}/benchmarks/{b}/tasks.json" for b in BENCHES]
EVAL_PARAMS = dict(eval=config["eval"], report=config["report"], seed=config["seed"], benches=BENCHES)


rule table_reliability:
    input:
        rollouts=rollouts(),
        manifests=MANIFESTS,
    output:
        md=report(f"{R}/tables/reliability.md", category="Tables", caption="../report/reliability.rst"),
        csv=f"{R}/tables/reliability.csv",
        tex=f"{R}/tables/reliability.tex",
    params:
        table="reliability",
        models=MODELS,
        **EVAL_PARAMS,
    log:
        f"{R}/logs/report/reliability.log",
    localrule: True
    conda:
        f"{ENVS}/report.yaml"
    script:
        f"{SCRIPTS}/report.py"


rule table_behaviour:
    input:
        rollouts=rollouts(),
        manifests=MANIFESTS,
    output:
        md=report(f"{R}/tables/behaviour.md", category="Tables", caption="../report/behaviour.rst"),
        csv=f"{R}/tables/behaviour.csv",
        tex=f"{R}/tables/behaviour.tex",
    params:
        table="behaviour",
        models=MODELS,
        **EVAL_PARAMS,
    log:
        f"{R}/logs/report/behaviour.log",
    localrule: True
    conda:
        f"{ENVS}/report.yaml"
    script:
        f"{SCRIPTS}/report.py"


rule table_tasks:
    input:
        rollouts=rollouts(),
        manifests=MANIFESTS,
    output:
        md=report(f"{R}/tables/tasks.md", category="Tables", caption="../report/tasks.rst"),
        csv=f"{R}/tables/tasks.csv",
        tex=f"{R}/tables/tasks.tex",
    params:
        table="tasks",
        models=MODELS,
        **EVAL_PARAMS,
    log:
        f"{R}/logs/report/tasks.log",
    localrule: True
    conda:
        f"{ENVS}/report.yaml"
    script:
        f"{SCRIPTS}/report.py"


rule table_budget:
    input:
        rollouts=[r for s in SUBSETS for r in rollouts(model=s.model)],
        manifests=MANIFESTS,
        summary=f"{R}/subsets/summary.csv",
    output:
        md=report(f"{R}/tables/budget.md", category="Tables", caption="../report/budget.rst"),
        csv=f"{R}/tables/budget.csv",
        tex=f"{R}/tables/budget.tex",
    params:
        table="budget",
        models=[s.model for s in SUBSETS],
        **EVAL_PARAMS,
    log:
        f"{R}/logs/report/budget.log",
    localrule: True
    conda:
        f"{ENVS}/report.yaml"
    script:
        f"{SCRIPTS}/report.py"


rule table_cost:
    input:
        models=trained_models(),
    output:
        md=report(f"{R}/tables/cost.md", category="Tables", caption="../report/cost.rst"),
        csv=f"{R}/tables/cost.csv",
        tex=f"{R}/tables/cost.tex",
    params:
        table="cost",
        h1=H1,
    log:
        f"{R}/logs/report/cost.log",
    localrule: True
    conda:
        f"{ENVS}/report.yaml"
    script:
        f"{SCRIPTS}/report.py"


rule figures:
    input:
        rollouts=rollouts(),
        manifests=MANIFESTS,
    output:
        passk=[report(f"{R}/figures/passk-{b}.png", category="Figures", caption="../report/passk.rst") for b in BENCHES],
        heatmap=[
            report(f"{R}/figures/tasks-{b}.png", category="Figures", caption="../report/heatmap.rst") for b in BENCHES
        ],
        episodes=report(f"{R}/figures/episodes.png", category="Figures", caption="../report/episodes.rst"),
    params:
        models=MODELS,
        **EVAL_PARAMS,
    log:
        f"{R}/logs/report/figures.log",
    localrule: True
    conda:
        f"{ENVS}/report.yaml"
    script:
        f"{SCRIPTS}/figures.py"


rule paired:
    input:
        rollouts=lambda wc: rollouts(model=wc.a) + rollouts(model=wc.b),
        manifests=MANIFESTS,
    output:
        report(f"{R}/tables/paired-{{a}}-vs-{{b}}.md", category="Tables", caption="../report/paired.rst"),
    params:
        a=lambda wc: wc.a,
        b=lambda wc: wc.b,
        **EVAL_PARAMS,
    wildcard_constraints:
        a=r"base|single-K\d+|refine-H\d+-(top|bottom|random|all)-\d+",
        b=r"base|single-K\d+|refine-H\d+-(top|bottom|random|all)-\d+",
    log:
        f"{R}/logs/report/paired-{{a}}-vs-{{b}}.log",
    localrule: True
    conda:
        f"{ENVS}/report.yaml"
    script:
        f"{SCRIPTS}/paired.py"
