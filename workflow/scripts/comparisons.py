"""Rule comparisons: each configuration against the baseline, its table and figure."""
from servelab.analysis.warm_script import run_warm

run_warm(__real_file__)  # noqa: F821 (Snakemake's copy of this script): its imports made once

import pandas as pd

from servelab.analysis import comparison_plot, comparisons
from servelab.atomic import atomic_path
from servelab.run.joblog import tee_stderr

with tee_stderr(snakemake.log[0]):
    table = pd.read_csv(snakemake.input[0])
    result = comparisons.compare(table, snakemake.params.load_knobs, snakemake.params.baseline,
                                  snakemake.params.margin)
    with atomic_path(snakemake.output.table) as tmp:
        result.to_csv(tmp, index=False)
    comparison_plot.draw(result, snakemake.output.figure, snakemake.params.title)
    print(f"{len(result)} comparison(s): " + ", ".join(f"{v} {n}" for v, n in result["verdict"].value_counts().items()))
