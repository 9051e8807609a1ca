"""Rules generated_dataset / downloaded_dataset: a ShareGPT-format workload."""
import sys

from servelab.fetch import datasets
from servelab.run.joblog import tee_stderr

spec = snakemake.params.spec
out = snakemake.output[0]
with tee_stderr(snakemake.log[0]):
    if "generate" in spec:
        gen = spec["generate"]
        datasets.generate_sharegpt(out, gen["conversations"], gen["seed"],
                                   tuple(gen["prompt_words"]), reply_words=tuple(gen["reply_words"]))
    else:
        datasets.download(spec["url"], out, spec["sha256"],
                          progress=lambda msg: print(msg, file=sys.stderr))
