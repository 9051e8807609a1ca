"""Rule session: measure the points of one server point the store lacks (and, where it
hosts other experiments' sessions on its engine, theirs: servelab/config/engine_groups.py;
where its experiment is measured in interleaved rounds and it is the first configuration,
every configuration's: servelab/serve/rounds.py)."""
import os

from servelab.checks import cross_checks
from servelab.run.gpu_claims import JobGpus
from servelab.run.joblog import tee_stderr
from servelab.serve import jit_builds, rounds
from servelab.serve.launch import engine_cache_env, log
from servelab.serve.session import run
from servelab.serve.session_spec import SessionSpec


def absolute(path):
    return os.path.abspath(path) if path else None


def spec_of(experiment, server_point, p, model, dataset, eval_tasks):
    return SessionSpec.from_params(
        experiment, server_point, p, model_path=os.path.abspath(model),
        dataset_path=absolute(dataset), eval_include_path=absolute(eval_tasks),
        store_dir=f"results/{experiment}/store",
        env={**engine_cache_env(p["engine"], snakemake.params.cache, p["env"]), **p["env"]},
        config_hash=cross_checks.config_hash(snakemake.config), workflow_dir=snakemake.scriptdir)


inputs = snakemake.input.keys()
spec = spec_of(snakemake.wildcards.experiment, snakemake.wildcards.server_point, snakemake.params.spec,
               snakemake.input.model, snakemake.input.dataset if "dataset" in inputs else None,
               snakemake.input.eval_tasks if "eval_tasks" in inputs else None)
guests = [spec_of(g["experiment"], g["server_point"], g["params"], snakemake.input.model, g["dataset"],
                  g["eval_tasks"]) for g in snakemake.params.spec.get("guests", [])]
members = [spec_of(spec.experiment, m["server_point"], m["params"], m["model"], m["dataset"], m["eval_tasks"])
           for m in snakemake.params.spec.get("round_members", [])]
# the config, not the params: in a job of its own the params function reads a view
# Snakemake has already removed (it reran the job because the view held failures)
retry = bool(snakemake.params.retry_failed or snakemake.config.get("retry_failed"))
with tee_stderr(snakemake.log[0]):
    if members:   # the first configuration of an experiment in rounds: every configuration, interleaved
        with JobGpus(int(getattr(snakemake.resources, "gpu", 0) or 0), progress=log) as gpus:
            # the servers of every configuration share the job's GPUs
            rounds.run(spec, members, snakemake.output[0], retry_failed=retry, gpus=gpus.take())
    else:
        if spec.rounds:   # another configuration of it: the rounds it decided, measured by the first's job
            spec = rounds.planned_here(spec)
        # on one machine (no SLURM): GPUs disjoint from the other running jobs', claimed once the
        # engine has imported where it can start before (servelab.engines.prestart)
        with JobGpus(int(getattr(snakemake.resources, "gpu", 0) or 0), progress=log) as gpus:
            # the JIT modules its engine's start needs, built with no GPU held while a
            # pre-started server imports (on one machine; under SLURM a job of the DAG built them)
            jit = snakemake.params.jit
            before_claim = (lambda: jit_builds.build_before_claim(spec.engine, snakemake.config, jit, progress=log)) \
                if jit else None
            run(spec, snakemake.output[0], retry_failed=retry, guests=guests, gpus=gpus,
                cold_at_once=snakemake.config.get("cold_starts_at_once"), before_claim=before_claim)
