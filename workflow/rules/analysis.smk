# Tidy tables and figures, from the saved benchmark JSON.


def figure_tables(wildcards):
    """The experiment's metrics table, then those of the experiments the figure joins."""
    spec = figure_spec(wildcards)
    return [f"results/{name}/metrics.csv" for name in [wildcards.experiment, *spec.get("also_from", [])]]


def figure_spec(wildcards):
    return EXPERIMENTS[wildcards.experiment]["figures"][wildcards.figure]


rule metrics_table:
    input:
        views=session_views,
    output:
        report(
            "results/{experiment}/metrics.csv",
            caption="../report/metrics.rst",
            category="{experiment}",
        ),
    params:
        store="results/{experiment}/store",
        # the configured point set: an edited grid reruns the table, and a view
        # that does not hold exactly these points is an error, never a silent row count
        points=configured_points,
    log:
        "logs/{experiment}/metrics.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/metrics_table.py"


rule figure:
    input:
        figure_tables,
    output:
        report(
            "results/{experiment}/{figure}.png",
            caption="../report/figure.rst",
            category="{experiment}",
        ),
    params:
        spec=figure_spec,
    log:
        "logs/{experiment}/{figure}.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/plot_figure.py"


rule timeline:
    # one point's seconds from its record of conditions: tokens/s, queue, KV, CPU by role, GPU
    # (servelab/analysis/timeline.py); KEY is the point's store key (metrics.csv: point_key)
    input:
        table="results/{experiment}/metrics.csv",
    output:
        "results/{experiment}/timeline/{key}.png",
    wildcard_constraints:
        key=r"[0-9a-f]{20}",
    log:
        "logs/{experiment}/timeline_{key}.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/timeline.py"


rule comparisons:
    # each configuration against the experiment's baseline at each load point (Welch's t, TOST)
    input:
        "results/{experiment}/metrics.csv",
    output:
        table=report("results/{experiment}/comparisons.csv", caption="../report/comparisons.rst", category="{experiment}"),
        figure=report("results/{experiment}/comparisons.png", caption="../report/comparisons.rst", category="{experiment}"),
    params:
        load_knobs=lambda wildcards: ex.load_knobs(EXPERIMENTS[wildcards.experiment]),
        baseline=lambda wildcards: EXPERIMENTS[wildcards.experiment].get("baseline"),
        margin=lambda wildcards: EXPERIMENTS[wildcards.experiment].get("equivalence_margin", 0.05),
        title=lambda wildcards: EXPERIMENTS[wildcards.experiment].get("title", wildcards.experiment),
    log:
        "logs/{experiment}/comparisons.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/comparisons.py"


rule paper_archive:
    # a frozen run for a paper: `snakemake --profile profiles/local paper_archive`
    # (make the report first to include it: snakemake ... --report report.html)
    input:
        default_targets(),
        # the views too: Snakemake keeps an up-to-date table whose view a failed job deleted
        lambda wildcards: [view for name in ex.enabled_experiments(config) for view in experiment_views(name)],
    output:
        "archive/servelab-archive.zip",
    params:
        experiments=ex.enabled_experiments(config),
        allow_dirty=config["archive_allow_dirty"],
        workflow_dir=workflow.basedir,
    log:
        "logs/paper_archive.log",
    localrule: True
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/paper_archive.py"
