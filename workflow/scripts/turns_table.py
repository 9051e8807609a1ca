"""Rule turns_table: TTFT and cached prompt tokens by turn (servelab.analysis.turns)."""
from servelab.analysis.warm_script import run_warm

run_warm(__real_file__)  # noqa: F821 (Snakemake's copy of this script): its imports made once

from servelab.analysis import turns
from servelab.atomic import atomic_path
from servelab.run.joblog import tee_stderr

with tee_stderr(snakemake.log[0]):
    df = turns.table(snakemake.input.views, snakemake.params.store,
                     snakemake.input.trace[0] if snakemake.input.trace else None)
    with atomic_path(snakemake.output.table) as tmp:
        df.to_csv(tmp, index=False)
    turns.figure(df, snakemake.output.figure, snakemake.params.title)
    print(df.to_string(index=False))
