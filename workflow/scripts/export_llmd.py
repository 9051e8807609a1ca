"""Rule export_llmd: every point of the experiment's table as an llm-d benchmark report."""
import sys
from pathlib import Path

from servelab.export import llmd_export
from servelab.run.joblog import tee_stderr

with tee_stderr(snakemake.log[0]):
    written = llmd_export.export(Path(snakemake.input.table).parent, snakemake.output[0])
    print(f"{sum(written.values())} llm-d report(s) in {snakemake.output[0]}", file=sys.stderr)
