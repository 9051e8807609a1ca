# Cache reuse by turn of the multi-turn and trace-replay experiments (docs/workloads.md).


def turns_trace(wildcards):
    """A trace replay's cropped trace (its requests' turns); none for AIPerf's points."""
    exp = EXPERIMENTS[wildcards.experiment]
    return [f"{DATASETS_DIR}/{exp['dataset']}.json"] if "trace" in config["datasets"][exp["dataset"]] else []


rule turns_table:
    input:
        views=session_views,
        trace=turns_trace,
    output:
        table=report("results/{experiment}/turns.csv", caption="../report/turns.rst", category="{experiment}"),
        figure=report("results/{experiment}/turns.png", caption="../report/turns.rst", category="{experiment}"),
    params:
        store="results/{experiment}/store",
        title=lambda wildcards: EXPERIMENTS[wildcards.experiment]["title"],
    log:
        "logs/{experiment}/turns.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/turns_table.py"
