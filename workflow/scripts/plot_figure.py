"""Rule figure: one figure declared in the experiment's config."""
import pandas as pd

from servelab import plots
from servelab.joblog import tee_stderr

with tee_stderr(snakemake.log[0]):
    table = pd.read_csv(snakemake.input[0])
    plots.draw(table, snakemake.params.spec, snakemake.output[0], name=snakemake.wildcards.figure)
