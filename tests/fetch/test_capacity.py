"""The capacity plan (servelab/fetch/capacity.py) against what the engines reported on
H100s and H200s: weights per GPU and KV cache tokens within 5 % (7 % where SGLang picks its
own memory fraction), vLLM and SGLang, TP 1/2/4, Mixtral's experts under TP and EP;
and the points that cannot fit, refused with the numbers."""
import pandas as pd
import pytest

from conftest import REPO, load_config
from servelab import machine
from servelab.config import engine_facts
from servelab.fetch import capacity
from servelab.fetch.capacity import kv_bytes_per_token, weight_bytes
from servelab.fetch.model_facts import decoder_params

RECORDED = REPO / "tests/data/recorded_gpu"
H100 = capacity.gpu_memory_mib("NVIDIA H100 80GB HBM3") / 1024
MODELS = load_config("config/studies/plan-check-moe-gpu.yaml")["models"]   # the course's and two MoE shapes

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
    # the table's KV tokens are the P/D decode server's, which picks a larger fraction
    ("h100x4_20261127/week16_sglang.metrics.csv", "week16_sglang", "base", "sglang", "llama31_8b",
     {"disaggregation_mode": "decode"}),
    ("h100x2_20261126c/week12.csv", "week12", "model=llama31_8b_fp8", "vllm", "llama31_8b_fp8",
     {"max_model_len": 4096, "quantization": "fp8"}),
    ("h100x2_20261126c/week12.csv", "week12", "model=llama31_8b_awq", "vllm", "llama31_8b_awq", {"max_model_len": 4096}),
    # 4x H200 (2026-11-28, seed 002's path): the whole GPU, and kv_cache_memory_bytes (an L4's
    # KV cache), which vLLM sizes its cache to whatever gpu_memory_utilization says
    ("h200x4_20261128_steady/study_phi4_path/metrics.csv", "study_phi4_path", "seqs128", "vllm", "phi4_mini",
     {"max_model_len": 1024, "gpu_memory_utilization": 0.9, "max_num_seqs": 128}),
    ("h200x4_20261128_steady/study_phi4_path/metrics.csv", "study_phi4_path", "seqs128_fp8kv", "vllm", "phi4_mini",
     {"max_model_len": 1024, "gpu_memory_utilization": 0.9, "max_num_seqs": 128, "kv_cache_dtype": "fp8"}),
    ("h200x4_20261128_steady/study_phi4_path_l4kv/metrics.csv", "study_phi4_path_l4kv", "seqs128", "vllm",
     "phi4_mini", {"max_model_len": 1024, "gpu_memory_utilization": 0.9, "kv_cache_memory_bytes": 13.5e9}),
    ("h200x4_20261128_steady/study_phi4_path_l4kv/metrics.csv", "study_phi4_path_l4kv", "seqs128_fp8kv", "vllm",
     "phi4_mini", {"max_model_len": 1024, "gpu_memory_utilization": 0.9, "kv_cache_memory_bytes": 13.5e9,
                   "kv_cache_dtype": "fp8"}),
    # one H200 (2026-11-29): the same L4 KV point one session at a time, and two MoE shapes
    # the plan models apart: Qwen-MoE's 128 experts, DeepSeek's latent attention
    ("h200_20261129_fp8kv/study_phi4_path_l4kv/metrics.csv", "study_phi4_path_l4kv", "seqs128_fp8kv", "vllm",
     "phi4_mini", {"max_model_len": 1024, "gpu_memory_utilization": 0.9, "kv_cache_memory_bytes": 13.5e9,
                   "kv_cache_dtype": "fp8"}),
    ("h200_20261129_moe_plan/plan_check_qwen3_moe/metrics.csv", "plan_check_qwen3_moe", "base", "vllm",
     "qwen3_30b_a3b", {"max_model_len": 4096, "gpu_memory_utilization": 0.9}),
    ("h200_20261129_moe_plan/plan_check_deepseek_mla/metrics.csv", "plan_check_deepseek_mla", "base", "vllm",
     "deepseek_v2_lite", {"max_model_len": 4096, "gpu_memory_utilization": 0.9}),
]


def measured(table: str, server_point: str) -> tuple[float, int, str]:
    """What the engine reported (weights per GPU, KV tokens) and the GPU it ran on."""
    rows = pd.read_csv(RECORDED / table)
    row = rows[(rows["server_point"] == server_point) & rows["kv_cache_tokens"].notna()].iloc[0]
    return float(row["weights_gib"]), int(row["kv_cache_tokens"]), row["hardware"].split(";")[0]


@pytest.mark.parametrize("table,experiment,server_point,engine,model,knobs", CASES,
                         ids=[f"{c[0].split('/')[0]}:{c[1]}[{c[2]}]" for c in CASES])
def test_the_plan_is_within_its_goal_of_what_the_engine_reported(table, experiment, server_point, engine, model,
                                                                  knobs):
    weights, tokens, gpu = measured(table, server_point)
    plan = capacity.plan_point(MODELS[model]["shape"]["config"], engine, knobs,
                               memory_gib=capacity.gpu_memory_mib(gpu) / 1024, memory_name=gpu)
    weights_error, tokens_error = plan.weights_gib / weights - 1, plan.kv_cache_tokens / tokens - 1
    print(f"\n{experiment} [{server_point}] {engine}: weights {plan.weights_gib} vs {weights} GiB "
          f"({weights_error:+.1%}), KV tokens {plan.kv_cache_tokens} vs {tokens} ({tokens_error:+.1%})")
    assert plan.fits
    assert abs(weights_error) <= 0.05 and abs(tokens_error) <= capacity.PLAN_ERROR


@pytest.mark.parametrize("gpu, knobs, logged", [
    ("NVIDIA H100 80GB HBM3", {}, 0.835),                                   # h100x2_20261126b/sglang0517_dp_replica.log
    ("NVIDIA H100 80GB HBM3", {"disaggregation_mode": "decode"}, 0.874),   # h100x2_20261126c/sglang0517_pd_decode_*.log
    ("NVIDIA H100 80GB HBM3", {"disaggregation_mode": "prefill"}, 0.835)])
def test_sglangs_own_fraction_is_the_one_its_logs_give(gpu, knobs, logged):
    """SGLang 0.5.17's server arguments as logged (mem_fraction_static=...) in
    tests/data/recorded_gpu, with none given: the decode server of a P/D pair reserves no
    prefill activations, so only the 10 GiB floor is held back. (One earlier start,
    sglang0517_h100_server.log, logged 0.83 with the same arguments: 0.6 % fewer tokens.)"""
    assert engine_facts.sglang_own_fraction(capacity.gpu_memory_mib(gpu), knobs, tp=1, pp=1) == logged


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
                               memory_gib=machine.host_memory_gib(), memory_name="host memory", device="cpu",
                               env={"VLLM_CPU_KVCACHE_SPACE": 1})
    assert plan.fits and plan.gpus == 0 and plan.memory.startswith("host memory (")
    assert plan.kv_cache_gib == 1.0 and plan.kv_cache_tokens == 2 ** 30 // plan.kv_bytes_per_token
    greedy = capacity.plan_point(capacity.tiny_config(recipe), "vllm", {}, memory_gib=0.5,
                                 memory_name="host memory", device="cpu", env={"VLLM_CPU_KVCACHE_SPACE": 1})
    assert not greedy.fits and "VLLM_CPU_KVCACHE_SPACE" in greedy.why
    # an engine whose facts name no CPU KV variable: the default 4 GiB, whatever vLLM's says
    other = capacity.plan_point(capacity.tiny_config(recipe), "sglang", {}, memory_gib=2.0, memory_name="host memory",
                                device="cpu", env={"VLLM_CPU_KVCACHE_SPACE": 1})
    assert not other.fits and "KV cache 4 GiB (the default)" in other.why


def test_fp8_kv_halves_the_bytes_per_token_and_tp_splits_the_kv_heads():
    config = MODELS["llama31_8b"]["shape"]["config"]
    assert capacity.kv_bytes_per_token(config, {}, 1, 1) == 2 * 32 * 8 * 128 * 2
    assert capacity.kv_bytes_per_token(config, {"kv_cache_dtype": "fp8"}, 1, 1) == 2 * 32 * 8 * 128
    assert capacity.kv_bytes_per_token(config, {}, 4, 1) == 2 * 32 * 2 * 128 * 2
    assert capacity.kv_bytes_per_token(config, {}, 16, 1) == 2 * 32 * 1 * 128 * 2   # a head at least


def test_a_point_short_of_one_sequence_inside_the_plans_error_is_warned_not_refused():
    config = MODELS["phi4_mini"]["shape"]["config"]
    per_token = capacity.kv_bytes_per_token(config, {}, 1, 1)
    # a KV cache of 97 % of one 4096-token sequence: the engine may hold one (the plan errs by
    # up to 6 %); at 90 % it cannot
    near = capacity.plan_point(config, "vllm", {"max_model_len": 4096, "kv_cache_memory_bytes": 0.97 * 4096 * per_token},
                               memory_gib=H100, memory_name="H100")
    assert near.fits and "within the plan's own error" in near.warning
    far = capacity.plan_point(config, "vllm", {"max_model_len": 4096, "kv_cache_memory_bytes": 0.9 * 4096 * per_token},
                              memory_gib=H100, memory_name="H100")
    assert not far.fits and far.warning is None and "fewer than one max_model_len 4096 sequence" in far.why
    # a KV cache asked beyond the GPU's memory is refused by name
    huge = capacity.plan_point(config, "vllm", {"max_model_len": 4096, "kv_cache_memory_bytes": 100 * 2 ** 30},
                               memory_gib=H100, memory_name="H100")
    assert not huge.fits and "(kv_cache_memory_bytes) exceed H100" in huge.why


def test_a_session_plans_on_the_gpus_it_was_given(tmp_path, monkeypatch):
    """CUDA_VISIBLE_DEVICES decides which GPU's memory the plan reads. nvidia-smi here is a
    stand-in (this machine has no GPU) that prints a box of an H100 and an H200."""
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nprintf '0, GPU-aaa, NVIDIA H100 80GB HBM3, 81559\\n1, GPU-bbb, NVIDIA H200, 143771\\n'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    assert [g[0] for g in machine.visible_gpus({"CUDA_VISIBLE_DEVICES": "1"})] == ["NVIDIA H200"]
    assert [g[0] for g in machine.visible_gpus({"CUDA_VISIBLE_DEVICES": "GPU-aaa"})] == ["NVIDIA H100 80GB HBM3"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert len(machine.visible_gpus({})) == 2
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(__import__("json").dumps(MODELS["phi4_mini"]["shape"]["config"]))
    plan = capacity.plan_here(model, "vllm", {"max_model_len": 1024}, {"CUDA_VISIBLE_DEVICES": "1"})
    assert plan.memory.startswith("NVIDIA H200")


# config.json sizes of two published checkpoints (their model cards give the totals)
QWEN3_30B_A3B = {"hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4,
                 "head_dim": 128, "vocab_size": 151936, "intermediate_size": 6144, "moe_intermediate_size": 768,
                 "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [],
                 "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
DEEPSEEK_V2_LITE = {"hidden_size": 2048, "num_hidden_layers": 27, "num_attention_heads": 16, "q_lora_rank": None,
                    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                    "vocab_size": 102400, "intermediate_size": 10944, "moe_intermediate_size": 1408,
                    "n_routed_experts": 64, "n_shared_experts": 2, "first_k_dense_replace": 1, "moe_layer_freq": 1,
                    "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


@pytest.mark.parametrize("config, published", [(QWEN3_30B_A3B, 30.5e9), (DEEPSEEK_V2_LITE, 15.7e9)],
                         ids=["qwen3-30b-a3b", "deepseek-v2-lite"])
def test_qwen_moe_and_deepseek_weights_count_every_expert(config, published):
    """Qwen-MoE's `num_experts` and DeepSeek's routed and shared experts, dense first layer
    and latent attention: the parameter count within 1 % of the model card's."""
    assert decoder_params(config) == pytest.approx(published, rel=0.01)
    assert weight_bytes(config, {}) == pytest.approx(2 * published, rel=0.01)


def test_latent_attention_caches_one_latent_a_layer_whole_on_every_tp_rank():
    """DeepSeek's MLA: (kv_lora_rank + qk_rope_head_dim) x 2 bytes a layer, 31,104 bytes a
    token for V2-Lite's 27 layers, not split by tensor parallelism (a GQA model's would be)."""
    assert kv_bytes_per_token(DEEPSEEK_V2_LITE, {}, tp=1, pp=1) == 27 * (512 + 64) * 2
    assert kv_bytes_per_token(DEEPSEEK_V2_LITE, {}, tp=2, pp=1) == 27 * (512 + 64) * 2
    assert kv_bytes_per_token(DEEPSEEK_V2_LITE, {"kv_cache_dtype": "fp8"}, tp=1, pp=1) == 27 * (512 + 64)
    assert kv_bytes_per_token(QWEN3_30B_A3B, {}, tp=2, pp=1) == 2 * 48 * 2 * 128 * 2   # 4 KV heads over 2 GPUs
