# One job per server point. A session's output is a view of the point store
# (results/{experiment}/store): a rerun caused by a new client point measures
# only that point.


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


# A search's frontier measured again (servelab/search/confirm.py, planned in search.smk):
# a session of a configuration the search launched, at its goodput load only.
def confirm_params(wildcards):
    """A frontier configuration's session: its goodput load only, `confirm_repeats` times
    (the search's own point is the first repeat, found in the store), no bisection."""
    name, sp = wildcards.experiment, wildcards.server_point
    search = EXPERIMENTS[name]["search"]
    entry = next(c for c in search_rounds(name)[-1]["confirm"] if c["server_point"] == sp)
    params = params_of(name, sp)
    return {**params, "load_search": None,
            "client_points": [{**params["client_points"][0], search["load"]["knob"]: entry["load"]}],
            "measurement": {**params["measurement"], "repeats": search_confirm.repeats(search), "drift_check": False}}


def confirm_inputs(wildcards):
    return {**session_files(wildcards), **start_marker()}


rule search_confirm:
    input:
        unpack(confirm_inputs),
    output:
        "results/{experiment}/search/confirm/{server_point}.json",
    params:
        spec=confirm_params,
        cache=config["paths"]["cache"],
        retry_failed=False,
    log:
        "logs/{experiment}/{server_point}.confirm.log",
    resources:
        gpu=gpus_for,
        runtime=session_runtime,
    conda:
        session_conda_env
    script:
        "../scripts/serve_session.py"
