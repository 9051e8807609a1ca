"""Rule search_summary: every configuration a search tried, and the best one."""
from servelab.analysis.warm_script import run_warm

run_warm(__real_file__)  # noqa: F821 (Snakemake's copy of this script): its imports made once

import json

import pandas as pd

from servelab.atomic import atomic_path, write_text
from servelab.run.joblog import tee_stderr
from servelab.search import progress

with tee_stderr(snakemake.log[0]):
    rows, best = progress.summary(snakemake.params.search, [json.load(open(p)) for p in snakemake.input.plans],
                                  snakemake.input.views, snakemake.params.store, confirm_views=snakemake.input.confirms)
    with atomic_path(snakemake.output.tried) as tmp:
        pd.DataFrame(rows).to_csv(tmp, index=False)
    write_text(snakemake.output.best, json.dumps(best, indent=2, default=str))
    print(progress.describe_best(snakemake.wildcards.experiment, best))
