"""Rule tiny_model: a random-weight Llama and a locally trained tokenizer."""
from servelab.fetch import tiny_model
from servelab.atomic import atomic_path
from servelab.run.joblog import tee_stderr

with tee_stderr(snakemake.log[0]), atomic_path(snakemake.output[0]) as tmp:
    tiny_model.build(tmp, snakemake.params.recipe)
