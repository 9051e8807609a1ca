"""Rule timeline: one point's seconds as a figure, from its record of conditions."""
from pathlib import Path

from servelab.analysis import timeline
from servelab.run.joblog import tee_stderr

with tee_stderr(snakemake.log[0]):
    timeline.draw_point(Path(snakemake.input.table).parent, snakemake.wildcards.key, snakemake.output[0])
