"""Checkpoint search_round: the configurations round N tries, from the rounds before it."""
import json

from servelab.atomic import write_text
from servelab.run.joblog import tee_stderr
from servelab.search import progress

with tee_stderr(snakemake.log[0]):
    plan = progress.plan_round(int(snakemake.wildcards.round), snakemake.params.search,
                               [json.load(open(p)) for p in snakemake.input.plans], snakemake.input.views,
                               store_dir=snakemake.params.store)
    print(progress.describe_round(snakemake.wildcards.experiment, plan))
    write_text(snakemake.output[0], json.dumps(plan, indent=2, default=str))
