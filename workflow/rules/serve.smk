# One job per server point. A session's output is a view of the point store
# (results/{experiment}/store): a rerun caused by a new client point measures
# only that point.
from servelab.serve import jit_prebuild

# FlashInfer's JIT modules that the run's vLLM starts would build while holding their GPUs
# (servelab/serve/jit_prebuild.py): each built once per box and cache, before a vLLM
# session that needs it claims a GPU. ancient(): a marker remade reruns no session. None on the CPU.
JIT_MARKER = f"{config['paths']['cache']}/flashinfer-prebuilt/{{module}}.json"


def jit_prebuilt(wildcards):
    if config["device"] == "cpu":
        return {}
    modules = jit_prebuild.point_modules(config, EXPERIMENTS[wildcards.experiment], server_knobs(wildcards))
    return {f"jit_{module}": ancient(JIT_MARKER.format(module=module)) for module in modules}


rule prebuild_jit:
    output:
        JIT_MARKER,
    wildcard_constraints:
        module=names_regex(jit_prebuild.MODULES),
    log:
        "logs/prebuild_jit/{module}.log",
    priority: 1000   # first: the vLLM sessions wait for it
    resources:
        gpu=0,
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
