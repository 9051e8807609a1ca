# One job per server point. A session's output is a view of the point store
# (results/{experiment}/store): a rerun caused by a new client point measures
# only that point.


rule serve_session:
    # a server launched once, every client point of the load sweep against it
    input:
        unpack(session_inputs),
    output:
        "results/{experiment}/sessions/{server_point}.json",
    wildcard_constraints:
        experiment=names_regex(experiments_of_kind("serve")),
    params:
        spec=session_params,
        store="results/{experiment}/store",
        cache=config["paths"]["cache"],
    log:
        "logs/{experiment}/{server_point}.session.log",
    resources:
        gpu=gpus_for,
    conda:
        session_conda_env
    script:
        "../scripts/serve_session.py"


rule offline_session:
    # `vllm bench throughput|latency`: the engine inside the benchmark, no server
    input:
        unpack(session_inputs),
    output:
        "results/{experiment}/sessions/{server_point}.json",
    wildcard_constraints:
        experiment=names_regex(experiments_of_kind("offline")),
    params:
        spec=session_params,
        store="results/{experiment}/store",
        cache=config["paths"]["cache"],
    log:
        "logs/{experiment}/{server_point}.session.log",
    resources:
        gpu=gpus_for,
    conda:
        session_conda_env
    script:
        "../scripts/serve_session.py"
