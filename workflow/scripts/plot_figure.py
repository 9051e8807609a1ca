"""Rule figure: one figure declared in the experiment's config."""
from servelab.analysis.warm_script import run_warm

run_warm(__real_file__)  # noqa: F821 (Snakemake's copy of this script): its imports made once

import pandas as pd

from servelab.analysis import plots
from servelab.run.joblog import tee_stderr

with tee_stderr(snakemake.log[0]):
    # the experiment's own table, and those of the experiments named in `also_from`
    table = pd.concat([pd.read_csv(f) for f in snakemake.input], ignore_index=True)
    plots.draw(table, snakemake.params.spec, snakemake.output[0], name=snakemake.wildcards.figure)
