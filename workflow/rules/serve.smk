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
