"""Rule shape_model: an architecture's config.json and a tokenizer of its vocabulary size."""
from servelab.fetch import shape_model
from servelab.atomic import atomic_path
from servelab.run.joblog import tee_stderr

with tee_stderr(snakemake.log[0]), atomic_path(snakemake.output[0]) as tmp:
    shape_model.build(tmp, snakemake.params.shape)
