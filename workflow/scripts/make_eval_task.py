"""Rule generated_eval_task: a local lm-eval task in a base task's format."""
from servelab.fetch.eval_task import write_task
from servelab.run.joblog import tee_stderr

spec = snakemake.params.spec
with tee_stderr(snakemake.log[0]):
    write_task(snakemake.output[0], spec["name"], spec["base"], spec["questions"], fewshot_pool=spec["fewshot_pool"],
               seed=spec["seed"])
