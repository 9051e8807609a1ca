# Models and workloads: downloaded (pinned, checksummed) or built locally from a seed.
# All four are deterministic in their params, so Snakemake's between-workflow cache
# (--cache, SNAKEMAKE_OUTPUT_CACHE on shared storage) can serve them to every clone.
# Measurements are never cached that way: the cache does not know the hardware.


def model_shape(wildcards):
    return config["models"][wildcards.model]["shape"]


def tiny_recipe(wildcards):
    return config["models"][wildcards.model]["tiny"]


def hub_model(wildcards):
    return config["models"][wildcards.model]


def dataset_spec(wildcards):
    return config["datasets"][wildcards.dataset]


# On a GPU box checked with dummy weights, every session waits until every model and dataset
# of the run is made (seconds): the scheduler's first choice is then among all sessions, and
# the widest (highest priority) takes the empty box. Sessions made ready one model at a time
# let a Mixtral's TP 2 pair and a P/D pair take the units a TP 4 session needed, which then
# ran last, after the others drained (4x H100, 2026-11-27). ancient(): a marker remade
# for a new model reruns no session.
RUN_INPUTS_MARKER = f"{MODELS_DIR}/.run-inputs-made"


def run_inputs(wildcards=None):
    return PLAN.run_inputs()


rule tiny_model:
    output:
        directory(f"{MODELS_DIR}/{{model}}"),
    wildcard_constraints:
        model=names_regex(kind_of("models", "tiny")),
    params:
        recipe=tiny_recipe,
    log:
        "logs/models/{model}.log",
    cache: "omit-software"
    conda:
        "../../envs/vllm.yaml"
    script:
        "../scripts/build_tiny_model.py"


rule shape_model:
    # an architecture's config.json and a tokenizer of its vocabulary size, no weights:
    # served with load_format dummy (random weights of the real shapes)
    output:
        directory(f"{MODELS_DIR}/shapes/{{model}}"),
    wildcard_constraints:
        model=names_regex(kind_of("models", "shape")),
    params:
        shape=model_shape,
    log:
        "logs/models/shape_{model}.log",
    cache: "omit-software"
    conda:
        "../../envs/vllm.yaml"
    script:
        "../scripts/build_shape_model.py"


rule hub_model:
    output:
        directory(f"{MODELS_DIR}/{{model}}"),
    wildcard_constraints:
        model=names_regex(kind_of("models", "hub")),
    params:
        spec=hub_model,
    log:
        "logs/models/{model}.log",
    cache: "omit-software"
    conda:
        "../../envs/vllm.yaml"
    script:
        "../scripts/download_model.py"


rule generated_dataset:
    output:
        f"{DATASETS_DIR}/{{dataset}}.json",
    wildcard_constraints:
        dataset=names_regex(kind_of("datasets", "generate")),
    params:
        spec=dataset_spec,
    log:
        "logs/datasets/{dataset}.log",
    cache: "omit-software"
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/make_dataset.py"


rule downloaded_dataset:
    output:
        f"{DATASETS_DIR}/{{dataset}}.json",
    wildcard_constraints:
        dataset=names_regex(kind_of("datasets", "url")),
    params:
        spec=dataset_spec,
    log:
        "logs/datasets/{dataset}.log",
    cache: "omit-software"
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/make_dataset.py"


rule trace_dataset:
    # a Mooncake-style trace, checked and cropped to its window (servelab/fetch/trace.py);
    # JSONL, whatever the name's suffix: vLLM's timed_trace reads it line by line
    input:
        lambda wildcards: config["datasets"][wildcards.dataset]["trace"]["file"],
    output:
        f"{DATASETS_DIR}/{{dataset}}.json",
    wildcard_constraints:
        dataset=names_regex(kind_of("datasets", "trace")),
    params:
        window_s=lambda wildcards: config["datasets"][wildcards.dataset]["trace"].get("window_s"),
    log:
        "logs/datasets/{dataset}.log",
    localrule: True
    run:
        from servelab.fetch import trace
        trace.write(trace.crop(trace.read(input[0]), params.window_s), output[0])


rule generated_eval_task:
    # a local lm-eval task in a base task's format (no hub); its YAML holds absolute
    # paths of this machine, so it is not put in the between-workflow cache
    output:
        directory(f"{DATASETS_DIR}/lm_eval/{{task}}"),
    wildcard_constraints:
        task=names_regex(GENERATED_EVAL_TASKS),
    params:
        spec=lambda wildcards: GENERATED_EVAL_TASKS[wildcards.task],
    log:
        "logs/datasets/lm_eval_{task}.log",
    conda:
        "../../envs/vllm.yaml"
    script:
        "../scripts/make_eval_task.py"


rule run_inputs_made:
    # every session's model and dataset made: on a GPU box's dummy-weights check the
    # sessions start together from here, widest first (RUN_INPUTS_MARKER above)
    localrule: True
    input:
        run_inputs,
    output:
        touch(RUN_INPUTS_MARKER),
