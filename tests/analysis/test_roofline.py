"""Week 3's lower bound from the model size and the GPU datasheet (resources/gpus.yaml)."""
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from conftest import load_config
from servelab.analysis import metrics, plots, roofline
from servelab.fetch import model_facts

LLAMA_8B_BF16 = {"weight_bytes": 16.06e9, "dtype": "bfloat16"}


def test_gpu_names_match_the_most_specific_datasheet_entry():
    assert roofline.gpu_spec("NVIDIA A100-SXM4-80GB")["hbm_gbps"] == 2039
    assert roofline.gpu_spec("NVIDIA A100-SXM4-40GB")["hbm_gbps"] == 1555
    assert roofline.gpu_spec("NVIDIA H100 80GB HBM3")["hbm_gbps"] == 3350
    assert roofline.gpu_spec("Intel Xeon") is None and roofline.gpu_spec(None) is None


def test_decode_is_memory_bound_at_batch_1_and_compute_bound_when_large():
    a100 = roofline.gpu_spec("A100-SXM4-80GB")
    params = 8.03e9
    one = roofline.step_time_s(16.06e9, params, 1, a100)
    assert one == pytest.approx(16.06e9 / 2039e9)          # ~7.9 ms: weights over HBM bandwidth
    assert roofline.step_time_s(16.06e9, params, 64, a100) == pytest.approx(one)  # still memory bound
    # past the ridge (~2 bytes/param x 153 FLOP/byte: ~300 tokens per step) arithmetic dominates
    big = roofline.step_time_s(16.06e9, params, 4096, a100)
    assert big == pytest.approx(2 * params * 4096 / 312e12) and big > 10 * one


def test_theory_columns_for_a_latency_row_and_none_without_a_known_gpu():
    row = {"batch_size": 1, "input_len": 256, "output_len": 64}
    cols = roofline.theory_columns(row, LLAMA_8B_BF16, ["NVIDIA A100-SXM4-80GB"])
    assert cols["theory_decode_step_ms"] == pytest.approx(7.88, rel=0.01)
    # 63 memory-bound decode steps + a compute-bound prefill of 256 tokens
    params = 16.06e9 / 2
    assert cols["theory_latency_s"] == pytest.approx(63 * 16.06e9 / 2039e9 + 2 * params * 256 / 312e12)
    assert roofline.theory_columns(row, LLAMA_8B_BF16, []) == {"theory_latency_s": None,
                                                               "theory_decode_step_ms": None}


def test_model_size_reads_the_checkpoint(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 1000)
    (tmp_path / "config.json").write_text('{"torch_dtype": "float32"}')
    assert model_facts.model_size(tmp_path) == {"weight_bytes": 1000, "dtype": "float32", "active_fraction": 1.0}


def test_a_theory_column_without_values_is_left_out_of_the_figure(tmp_path):
    df = pd.DataFrame({"batch_size": [1, 8], "latency_p50_s": [0.05, 0.15], "latency_p99_s": [0.06, 0.2],
                       "theory_latency_s": [math.nan] * 2})
    ys = ["latency_p50_s", "latency_p99_s", "theory_latency_s"]
    data, hue = plots.long_form(df, {"y": ys})
    assert set(data["statistic"]) == {"latency_p50_s", "latency_p99_s"} and hue == "statistic"
    plots.draw(df, {"x": "batch_size", "y": ys, "xlabel": "Batch size", "ylabel": "Latency (s)"}, tmp_path / "f.png")
    with_theory = df.assign(theory_latency_s=[0.01, 0.02])
    assert set(plots.long_form(with_theory, {"y": ys})[0]["statistic"]) == set(ys)


def test_a_shape_without_weights_is_sized_from_its_config(tmp_path, course_config):
    """Llama-3.1-8B's published size is 8.03 B parameters; Mixtral-8x7B's 46.7 B;
    Llama-3.2-1B's (the week 11 draft, tied embeddings) 1.24 B."""
    from servelab.fetch import shape_model

    llama = course_config["models"]["llama31_8b"]["shape"]["config"]
    assert model_facts.decoder_params(llama) == pytest.approx(8.03e9, rel=0.002)
    assert model_facts.decoder_params(course_config["models"]["mixtral_8x7b"]["shape"]["config"]) == pytest.approx(
        46.7e9, rel=0.005)
    assert model_facts.decoder_params(course_config["models"]["llama32_1b"]["shape"]["config"]) == pytest.approx(
        1.236e9, rel=0.005)
    size = model_facts.model_size(shape_model.build(tmp_path / "m", {"config": llama}))
    assert size == {"weight_bytes": model_facts.decoder_params(llama) * 2, "dtype": "bfloat16",
                    "active_fraction": round(1 - 128256 * 4096 / model_facts.decoder_params(llama), 4)}


MOE_RUN = Path(__file__).parents[2] / "tests/data/recorded_gpu/h200_20261129_moe_plan"
MOE_MODELS = load_config("config/studies/plan-check-moe-gpu.yaml")["models"]


@pytest.mark.parametrize("model, published, counts_embeddings", [
    ("mixtral_8x7b", 12.9e9, True), ("qwen3_30b_a3b", 3.3e9, True),
    # DeepSeek-V2-Lite's card gives 2.4 B activated without the embedding table (2.66 B with it)
    ("deepseek_v2_lite", 2.4e9, False)])
def test_one_tokens_decode_step_reads_its_experts_not_the_embedding_table(model, published, counts_embeddings):
    config = MOE_MODELS[model]["shape"]["config"]
    read = model_facts.decoder_params(config) * model_facts.active_fraction(config)
    table = config["vocab_size"] * config["hidden_size"]
    assert read + (table if counts_embeddings else 0) == pytest.approx(published, rel=0.025)


@pytest.mark.parametrize("experiment, model", [("plan_check_qwen3_moe", "qwen3_30b_a3b"),
                                               ("plan_check_deepseek_mla", "deepseek_v2_lite")])
def test_a_moe_served_on_an_h200_decodes_above_its_floor(tmp_path, experiment, model):
    """Recorded on one H200 (vLLM 0.26.0, random weights, 16 prompts at once): ITL p50 12.4 ms
    (Qwen3-30B-A3B) and 3.9 ms (DeepSeek-V2-Lite). The box's table took both for measurement
    errors: its floor read every expert each step (12.7 and 6.6 ms)."""
    record = json.loads((MOE_RUN / experiment / "record.json").read_text())
    bench = json.loads((MOE_RUN / experiment / "bench.json").read_text())
    as_recorded = metrics.point_row(record, bench)     # the size it recorded: every weight read
    assert not as_recorded["valid"] and "decode floor" in as_recorded["invalid_reason"]
    (tmp_path / "config.json").write_text(json.dumps(MOE_MODELS[model]["shape"]["config"]))
    record["model_size"] = model_facts.model_size(tmp_path)   # what a measurement records today
    row = metrics.point_row(record, bench)
    assert row["valid"], row["invalid_reason"]
    assert row["itl_floor_ms"] < row["itl_p50_ms"] < 10 * row["itl_floor_ms"]
