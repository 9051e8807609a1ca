# Models and workloads: downloaded (pinned, checksummed) or built locally from a seed.
# All four are deterministic in their params, so Snakemake's between-workflow cache
# (--cache, SNAKEMAKE_OUTPUT_CACHE on shared storage) can serve them to every clone.
# Measurements are never cached that way: the cache does not know the hardware.


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
    # sessions start together from here, widest first (common.smk, RUN_INPUTS_MARKER)
    localrule: True
    input:
        run_inputs,
    output:
        touch(RUN_INPUTS_MARKER),
