# Results that other tools read: each measured point as an llm-d benchmark report (0.2.1),
# validated against its schema (servelab/export/; docs/export-and-import.md). Not in the
# default target: `snakemake --profile profiles/local results/week01/export/llmd`.


rule export_llmd:
    input:
        table="results/{experiment}/metrics.csv",
        views=session_views,
    output:
        directory("results/{experiment}/export/llmd"),
    log:
        "logs/{experiment}/export_llmd.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/export_llmd.py"
