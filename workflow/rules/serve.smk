# One job per server point. A session's output is a view of the point store
# (results/{experiment}/store): a rerun caused by a new client point measures
# only that point.
from servelab.engines.registry import ENGINES

# JIT modules that the run's engine starts would build while holding their GPUs (each engine's
# face says which: vLLM's FlashInfer modules; servelab/serve/jit_builds.py): each built once per
# box and cache, before a session that needs it claims a GPU. None on the CPU.
JIT_MARKER = f"{config['paths']['cache']}/jit-prebuilt/{{engine}}/{{module}}.json"


def jit_markers(wildcards):
    exp = EXPERIMENTS[wildcards.experiment]
    if config["device"] == "cpu" or not exp.get("server"):
        return {}
    modules = ENGINES[exp["engine"]].jit_modules(config, exp, server_knobs(wildcards))
    return {module: JIT_MARKER.format(engine=exp["engine"], module=module) for module in modules}


def builds_in_session():
    """On one machine (no SLURM) a session builds its modules itself before it claims a GPU,
    while its pre-started server imports. A SLURM job holds its GPUs from its start, so there
    (and in its preview) the prebuild_jit jobs come first. Snakemake keeps no name of the
    executor a dry run previews; it runs the jobs of any but a local one in threads
    (snakemake/api.py), which is what tells them apart here."""
    settings = workflow.execution_settings
    return bool(settings is not None and not settings.use_threads and not workflow.remote_exec)


def jit_prebuilt(wildcards):
    # ancient(): a marker remade reruns no session
    return {} if builds_in_session() else {f"jit_{m}": ancient(path) for m, path in jit_markers(wildcards).items()}


def jit_in_session(wildcards):
    return jit_markers(wildcards) if builds_in_session() else {}


def sessions_start_together():
    return config["device"] != "cpu" and bool(config.get("dummy_weights"))


def start_marker():
    return {"run_inputs": ancient(RUN_INPUTS_MARKER)} if sessions_start_together() else {}


def session_files(wildcards):
    return PLAN.files(wildcards.experiment, wildcards.server_point)


def session_inputs(wildcards):
    inputs = {**session_files(wildcards), **start_marker(), **jit_prebuilt(wildcards)}
    session = (wildcards.experiment, wildcards.server_point)
    if session in ENGINE_HOSTS:
        # after its host, whose job measures its points on the same engine: it then finds
        # nothing to measure. Not ancient(): Snakemake would then skip the guest's own
        # params check whenever its host reruns (a guest's change reruns both).
        inputs["engine_host"] = "results/{}/sessions/{}.json".format(*ENGINE_HOSTS[session])
    inputs["guest_files"] = [f for g in PLAN.guests_of(session) for f in PLAN.guest_files(*g).values() if f]
    # an experiment in interleaved rounds: its first configuration's job measures them all
    # (servelab/serve/rounds.py); the others' jobs follow it and write their views
    if (host := PLAN.round_host(session)) is not None:
        inputs["round_host"] = "results/{}/sessions/{}.json".format(*host)
    inputs["round_files"] = PLAN.round_files(session)
    return inputs


def session_params(wildcards):
    return PLAN.session_params(wildcards.experiment, wildcards.server_point)


def retry_failed_points(wildcards):
    """True for a session whose view holds failed points when `retry_failed` is set:
    its params change, so Snakemake reruns it (and only it)."""
    view = f"results/{wildcards.experiment}/sessions/{wildcards.server_point}.json"
    return bool(config["retry_failed"] and failure.failed_records([view]))


def session_conda_env(wildcards):
    """The engine's environment, as its face names it (HF transformers runs in vLLM's: same torch)."""
    name = ENGINES[EXPERIMENTS[wildcards.experiment]["engine"]].conda_env
    return os.path.join(workflow.basedir, "envs", f"{name}.yaml")


def gpus_for(wildcards):
    return PLAN.gpus(wildcards.experiment, wildcards.server_point)


def session_priority(wildcards):
    return PLAN.priority(wildcards.experiment, wildcards.server_point)


def session_runtime(wildcards):
    return PLAN.runtime(wildcards.experiment, wildcards.server_point)


rule prebuild_jit:
    output:
        JIT_MARKER,
    wildcard_constraints:
        engine=names_regex([name for name, face in ENGINES.items() if face.jit_module_names]),
        module=names_regex({m for face in ENGINES.values() for m in face.jit_module_names}),
    log:
        "logs/prebuild_jit/{engine}/{module}.log",
    priority: 1000   # first: the sessions wait for it (no `gpu` resource: it holds none)
    # (under SLURM; on one machine the sessions build what they need: builds_in_session)
    script:
        "../scripts/prebuild_jit.py"


rule session:
    # serve: a server launched once, every client point of the load sweep against it;
    # offline: `vllm bench throughput|latency` or HF static batching, every point of the session
    # in one runner process, its engine built once per engine configuration (no server)
    input:
        unpack(session_inputs),
    output:
        "results/{experiment}/sessions/{server_point}.json",
    params:
        spec=session_params,
        cache=config["paths"]["cache"],
        retry_failed=retry_failed_points,
        jit=jit_in_session,
    log:
        "logs/{experiment}/{server_point}.session.log",
    # wide sessions first: a TP 4 session left for the end strands GPUs while it waits for four
    priority: session_priority
    resources:
        gpu=gpus_for,
        runtime=session_runtime,
    conda:
        session_conda_env
    script:
        "../scripts/serve_session.py"
