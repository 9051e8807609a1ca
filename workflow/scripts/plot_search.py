"""Rule search_figures: goodput by configuration tried, the SLO frontier, the Pareto front."""
from servelab.analysis.warm_script import run_warm

run_warm(__real_file__)  # noqa: F821 (Snakemake's copy of this script): its imports made once

import json

from servelab.analysis import search_plots
from servelab.run.joblog import tee_stderr

with tee_stderr(snakemake.log[0]):
    search_plots.draw_all(snakemake.input.metrics, snakemake.input.tried, json.load(open(snakemake.input.best)),
                          snakemake.params.search, outs=dict(snakemake.output.items()))
