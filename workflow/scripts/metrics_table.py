"""Rule metrics_table: one tidy row per measured point."""
from servelab.analysis import metrics
from servelab.atomic import atomic_path
from servelab.run.joblog import tee_stderr

with tee_stderr(snakemake.log[0]):
    table = metrics.table(snakemake.input.views, snakemake.params.store, snakemake.params.points,
                          snakemake.config["ttft_floor_factor"])
    with atomic_path(snakemake.output[0]) as tmp:
        table.to_csv(tmp, index=False)
