# Tables and figures: the single target users ask for. Each table builds only what it needs.


rule table_reliability:
    input:
        rollouts=rollouts(),
    output:
        md=report(f"{R}/tables/reliability.md", category="Tables", caption="../report/reliability.rst"),
        csv=f"{R}/tables/reliability.csv",
        tex=f"{R}/tables/reliability.tex",
    params:
        table="reliability",
        models=MODELS,
        benches=BENCHES,
        eval=config["eval"],
        report=config["report"],
        seed=config["seed"],
    log:
        f"{R}/logs/report/reliability.log",
    localrule: True
    conda:
        f"{ENVS}/report.yaml"
    script:
        f"{SCRIPTS}/report.py"


rule table_cost:
    input:
        models=trained_models(),
    output:
        md=report(f"{R}/tables/cost.md", category="Tables"),
        csv=f"{R}/tables/cost.csv",
        tex=f"{R}/tables/cost.tex",
    params:
        table="cost",
        models=MODELS,
        h1=H1,
        horizons=HORIZONS,
    log:
        f"{R}/logs/report/cost.log",
    localrule: True
    conda:
        f"{ENVS}/report.yaml"
    script:
        f"{SCRIPTS}/report.py"


rule table_behaviour:
    input:
        rollouts=rollouts(),
    output:
        md=report(f"{R}/tables/behaviour.md", category="Tables"),
        csv=f"{R}/tables/behaviour.csv",
        tex=f"{R}/tables/behaviour.tex",
    params:
        table="behaviour",
        models=MODELS,
        benches=BENCHES,
        eval=config["eval"],
        report=config["report"],
    log:
        f"{R}/logs/report/behaviour.log",
    localrule: True
    conda:
        f"{ENVS}/report.yaml"
    script:
        f"{SCRIPTS}/report.py"


rule table_budget:
    input:
        rollouts=[r for s in SUBSETS for r in rollouts(model=s.model)],
        summary=f"{R}/subsets/summary.csv",
    output:
        md=report(f"{R}/tables/budget.md", category="Tables"),
        csv=f"{R}/tables/budget.csv",
        tex=f"{R}/tables/budget.tex",
    params:
        table="budget",
        models=[s.model for s in SUBSETS],
        benches=BENCHES,
        eval=config["eval"],
        report=config["report"],
    log:
        f"{R}/logs/report/budget.log",
    localrule: True
    conda:
        f"{ENVS}/report.yaml"
    script:
        f"{SCRIPTS}/report.py"


rule table_tasks:
    input:
        rollouts=rollouts(),
    output:
        md=report(f"{R}/tables/tasks.md", category="Tables"),
        csv=f"{R}/tables/tasks.csv",
        tex=f"{R}/tables/tasks.tex",
    params:
        table="tasks",
        models=MODELS,
        benches=BENCHES,
        eval=config["eval"],
        report=config["report"],
    log:
        f"{R}/logs/report/tasks.log",
    localrule: True
    conda:
        f"{ENVS}/report.yaml"
    script:
        f"{SCRIPTS}/report.py"
