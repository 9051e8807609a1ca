# One job per server point: one server launch, every client point it lacks.
# Its output is a view of the point store (results/{experiment}/store): a rerun
# caused by a new client point measures only that point.


rule serve_session:
    input:
        unpack(session_inputs),
    output:
        "results/{experiment}/sessions/{server_point}.json",
    params:
        spec=session_params,
        store="results/{experiment}/store",
        cache=config["paths"]["cache"],
    log:
        "logs/{experiment}/{server_point}.session.log",
    resources:
        gpu=gpus_for,
    conda:
        "../../envs/vllm.yaml"
    script:
        "../scripts/serve_session.py"
