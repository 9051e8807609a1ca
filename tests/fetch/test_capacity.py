"""The capacity plan (servelab/fetch/capacity.py) against what the engines reported on
lent H100s: weights per GPU within 5 %, KV cache tokens within 15 % (the goal of
docs/capacity-plan.md), vLLM and SGLang, TP 1/2/4, Mixtral's experts under TP and EP;
and the points that cannot fit, refused with the numbers."""
import pandas as pd
import pytest

from conftest import REPO, load_config
from servelab.fetch import capacity

RECORDED = REPO / "tests/data/recorded_gpu"
H100 = capacity.gpu_memory_mib("NVIDIA H100 80GB HBM3") / 1024
MODELS = load_config("config/config.yaml")["models"]

# (table, experiment, server point, engine, model, the point's knobs as the run served them)
CASES = [
    ("h100x4_20261127/week13.metrics.csv", "week13", "tensor_parallel_size=1", "vllm", "llama31_8b",
     {"tensor_parallel_size": 1, "max_model_len": 4096}),
    ("h100x4_20261127/week13.metrics.csv", "week13", "tensor_parallel_size=2", "vllm", "llama31_8b",
     {"tensor_parallel_size": 2, "max_model_len": 4096}),
    ("h100x4_20261127/week13.metrics.csv", "week13", "tensor_parallel_size=4", "vllm", "llama31_8b",
     {"tensor_parallel_size": 4, "max_model_len": 4096}),
    ("h100x4_20261127/week14.metrics.csv", "week14", "enable_expert_parallel=false", "vllm", "mixtral_8x7b",
     {"tensor_parallel_size": 2, "max_model_len": 8192}),
    ("h100x4_20261127/week14.metrics.csv", "week14", "enable_expert_parallel=true", "vllm", "mixtral_8x7b",
     {"tensor_parallel_size": 2, "max_model_len": 8192, "enable_expert_parallel": True}),
    ("h100x4_20261127/week01.metrics.csv", "week01", "base", "vllm", "llama31_8b", {"max_model_len": 4096}),
    ("h100x4_20261127/week01_sglang.metrics.csv", "week01_sglang", "base", "sglang", "llama31_8b", {}),
    ("h100x4_20261127/week16_sglang.metrics.csv", "week16_sglang", "base", "sglang", "llama31_8b", {}),
    ("h100x2_20261126c/week12.csv", "week12", "model=llama31_8b_fp8", "vllm", "llama31_8b_fp8",
     {"max_model_len": 4096, "quantization": "fp8"}),
    ("h100x2_20261126c/week12.csv", "week12", "model=llama31_8b_awq", "vllm", "llama31_8b_awq", {"max_model_len": 4096}),
]


def measured(table: str, server_point: str) -> tuple[float, int]:
    rows = pd.read_csv(RECORDED / table)
    row = rows[(rows["server_point"] == server_point) & rows["kv_cache_tokens"].notna()].iloc[0]
    return float(row["weights_gib"]), int(row["kv_cache_tokens"])


@pytest.mark.parametrize("table,experiment,server_point,engine,model,knobs", CASES,
                         ids=[f"{c[1]}[{c[2]}]" for c in CASES])
def test_the_plan_is_within_its_goal_of_what_the_engine_reported(table, experiment, server_point, engine, model,
                                                                  knobs):
    weights, tokens = measured(table, server_point)
    plan = capacity.plan_point(MODELS[model]["shape"]["config"], engine, knobs, memory_gib=H100,
                               memory_name="NVIDIA H100 80GB HBM3")
    weights_error, tokens_error = plan.weights_gib / weights - 1, plan.kv_cache_tokens / tokens - 1
    print(f"\n{experiment} [{server_point}] {engine}: weights {plan.weights_gib} vs {weights} GiB "
          f"({weights_error:+.1%}), KV tokens {plan.kv_cache_tokens} vs {tokens} ({tokens_error:+.1%})")
    assert plan.fits
    assert abs(weights_error) <= 0.05 and abs(tokens_error) <= 0.15


def test_the_8b_shape_at_five_percent_of_an_h100_is_refused_with_its_numbers():
    """The recorded dead start (vllm026_h100_no_kv_cache_memory.log): refused before any start."""
    plan = capacity.plan_point(MODELS["llama31_8b"]["shape"]["config"], "vllm",
                               {"max_model_len": 4096, "gpu_memory_utilization": 0.05},
                               memory_gib=H100, memory_name="NVIDIA H100 80GB HBM3")
    assert not plan.fits and plan.kv_cache_tokens == 0
    assert plan.why.startswith("no memory for the KV cache: gpu_memory_utilization 0.05 x NVIDIA H100 80GB HBM3 "
                               "(79.6 GiB) = 4.0 GiB, less weights 14.96 GiB per GPU"), plan.why


def test_mixtral_needs_two_80gb_gpus_or_an_h200():
    mixtral = MODELS["mixtral_8x7b"]["shape"]["config"]
    one = capacity.plan_point(mixtral, "vllm", {"max_model_len": 8192}, memory_gib=H100, memory_name="H100")
    assert not one.fits and one.weights_gib > 80 and "no memory for the KV cache" in one.why
    two = capacity.plan_point(mixtral, "vllm", {"max_model_len": 8192, "tensor_parallel_size": 2},
                              memory_gib=H100, memory_name="H100")
    assert two.fits and two.gpus == 2 and two.sequences > 10
    h200 = capacity.plan_point(mixtral, "vllm", {"max_model_len": 8192},
                               memory_gib=capacity.gpu_memory_mib("NVIDIA H200") / 1024, memory_name="H200")
    assert h200.fits


def test_too_few_tokens_for_one_sequence_is_refused():
    plan = capacity.plan_point(MODELS["llama31_8b"]["shape"]["config"], "vllm",
                               {"gpu_memory_utilization": 0.2, "max_model_len": 131072},
                               memory_gib=H100, memory_name="H100")
    assert not plan.fits and "fewer than one max_model_len 131072 sequence" in plan.why


def test_the_cpu_default_plans_against_the_hosts_memory():
    recipe = load_config("config/local.yaml")["models"]["tiny_llama"]["tiny"]
    plan = capacity.plan_point(capacity.tiny_config(recipe), "vllm", {"max_model_len": 2048},
                               memory_gib=capacity.host_memory_gib(), memory_name="host memory", device="cpu",
                               env={"VLLM_CPU_KVCACHE_SPACE": 1})
    assert plan.fits and plan.gpus == 0 and plan.memory.startswith("host memory (")
    assert plan.kv_cache_gib == 1.0 and plan.kv_cache_tokens == 2 ** 30 // plan.kv_bytes_per_token
    greedy = capacity.plan_point(capacity.tiny_config(recipe), "vllm", {}, memory_gib=0.5,
                                 memory_name="host memory", device="cpu", env={"VLLM_CPU_KVCACHE_SPACE": 1})
    assert not greedy.fits and "VLLM_CPU_KVCACHE_SPACE" in greedy.why


def test_fp8_kv_halves_the_bytes_per_token_and_tp_splits_the_kv_heads():
    config = MODELS["llama31_8b"]["shape"]["config"]
    assert capacity.kv_bytes_per_token(config, {}, 1, 1) == 2 * 32 * 8 * 128 * 2
    assert capacity.kv_bytes_per_token(config, {"kv_cache_dtype": "fp8"}, 1, 1) == 2 * 32 * 8 * 128
    assert capacity.kv_bytes_per_token(config, {}, 4, 1) == 2 * 32 * 2 * 128 * 2
    assert capacity.kv_bytes_per_token(config, {}, 16, 1) == 2 * 32 * 1 * 128 * 2   # a head at least
