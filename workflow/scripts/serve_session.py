"""Rule session: measure the points of one server point the store lacks."""
import os

from servelab.config import checks as servelab_config
from servelab.run.gpu_slots import assigned_gpus
from servelab.run.joblog import tee_stderr
from servelab.serve.session import SessionSpec, engine_cache_env, log, run

p = snakemake.params.spec
env = {**engine_cache_env(p["engine"], snakemake.params.cache), **p["env"]}
spec = SessionSpec(
    experiment=snakemake.wildcards.experiment,
    server_point=snakemake.wildcards.server_point,
    engine=p["engine"],
    kind=p["kind"],
    tool=p["tool"],
    model_path=os.path.abspath(snakemake.input.model),
    model_identity=p["model_identity"],
    dataset_name=p["dataset_name"],
    dataset_path=os.path.abspath(snakemake.input.dataset) if "dataset" in snakemake.input.keys() else None,
    dataset_identity=p["dataset_identity"],
    server_knobs=p["server_knobs"],
    client_points=p["client_points"],
    store_dir=snakemake.params.store,
    startup_timeout_s=p["startup_timeout_s"],
    env=env,
    config_hash=servelab_config.config_hash(snakemake.config),
    workflow_dir=snakemake.scriptdir,
    topology=p["topology"],
    monitors=p["monitors"],
    identity_env=p["identity_env"],
    measurement=p["measurement"],
    load_search=p["load_search"],
    eval_include_path=os.path.abspath(snakemake.input.eval_tasks) if "eval_tasks" in snakemake.input.keys() else None,
)
with tee_stderr(snakemake.log[0]):
    # on one multi-GPU machine (no SLURM): GPUs disjoint from the other running jobs'
    with assigned_gpus(int(getattr(snakemake.resources, "gpu", 0) or 0), progress=log):
        run(spec, snakemake.output[0], retry_failed=bool(snakemake.params.retry_failed))
