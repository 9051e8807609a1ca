"""Rule hub_model: a pinned snapshot from the HuggingFace hub.

HF_TOKEN is read from the environment by huggingface_hub; it is never passed
as a parameter, printed or logged.
"""
from huggingface_hub import snapshot_download

from servelab.atomic import atomic_path
from servelab.run.joblog import tee_stderr

spec = snakemake.params.spec
with tee_stderr(snakemake.log[0]), atomic_path(snakemake.output[0]) as tmp:
    snapshot_download(repo_id=spec["hub"], revision=spec["revision"], local_dir=tmp)
