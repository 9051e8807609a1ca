"""Rule metrics_table: one tidy row per measured point."""
from servelab.analysis.warm_script import run_warm

run_warm(__real_file__)  # noqa: F821 (Snakemake's copy of this script): its imports made once

from servelab.analysis import metrics
from servelab.atomic import atomic_path
from servelab.run.joblog import tee_stderr

with tee_stderr(snakemake.log[0]):
    table = metrics.table(snakemake.input.views, snakemake.params.store, snakemake.params.points,
                          snakemake.config["ttft_floor_factor"])
    with atomic_path(snakemake.output[0]) as tmp:
        table.to_csv(tmp, index=False)
