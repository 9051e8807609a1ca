"""The table and figure of a real GPU run, replayed from its recordings
(tests/data/recorded_gpu/week12_h100: week 12 of the dummy-weights check on an H100,
vLLM 0.26.0): what vLLM 0.26 saved on a GPU parses into complete rows."""
from pathlib import Path

import matplotlib.image as mpimg
import pandas as pd
import pytest

from servelab.analysis import checks, comparisons, figure_notes, metrics, plots
from servelab.engines import server_log
from servelab.engines.registry import ENGINES

RUN = Path(__file__).parents[1] / "data/recorded_gpu/week12_h100"


@pytest.fixture(scope="module")
def table():
    return metrics.table(sorted((RUN / "sessions").glob("*.json")), RUN / "store").set_index("server_point")


def test_every_precision_is_a_complete_valid_row(table):
    assert sorted(table.index) == ["model=llama31_8b", "model=llama31_8b_awq", "model=llama31_8b_fp8"]
    assert table["valid"].all() and (table["completed"] == 16).all()
    assert (table["engine_version"] == "0.26.0").all() and (table["device"] == "gpu").all()
    assert table["hardware"].str.startswith("NVIDIA H100 80GB HBM3").all()
    assert table["model"].str.startswith("shape:").all()


def test_start_up_facts_of_vllm_026_fill_the_columns(table):
    # weights from the load line ("Model loading took 5.49 GiB and ..."), KV from /metrics
    assert table["weights_gib"].to_dict() == {"model=llama31_8b": 15.0, "model=llama31_8b_awq": 5.49,
                                              "model=llama31_8b_fp8": 8.54}
    assert (table["kv_cache_blocks"] * 16 == table["kv_cache_tokens"]).all()
    # smaller weights leave more memory for the KV cache
    assert (table.loc["model=llama31_8b_awq", "kv_cache_tokens"] > table.loc["model=llama31_8b_fp8", "kv_cache_tokens"]
            > table.loc["model=llama31_8b", "kv_cache_tokens"])
    assert (table["max_concurrency_x"] > 100).all()


def test_the_precision_figure_draws_from_the_recorded_rows(table, tmp_path):
    spec = {"x": "server_point", "y": "output_throughput_tps", "xlabel": "Checkpoint",
            "ylabel": "Output throughput (tokens/s)", "title": "Output throughput by weight precision"}
    out = plots.draw(table.reset_index(), spec, tmp_path / "throughput_by_precision.png")
    assert mpimg.imread(out).shape[0] > 200
    assert figure_notes.hardware_footer(table).startswith("measured on NVIDIA H100 80GB HBM3")
    assert "not which engine" not in figure_notes.hardware_footer(table)


SGLANG_RUN = Path(__file__).parents[1] / "data/recorded_gpu/week01_sglang_h100"


def test_sglangs_first_served_points_parse_into_complete_rows():
    # week01_sglang of the GPU check, SGLang 0.5.17 on a lent H100 (2026-11-26): the store
    # and the points of its one session (the session was stopped before its `inf` point)
    table = metrics.table(sorted((SGLANG_RUN / "sessions").glob("*.json")), SGLANG_RUN / "store")
    assert list(table["request_rate"]) == [1.0, 4.0, 10.0]
    assert table["valid"].all() and (table["completed"] == 16).all()
    assert (table["engine_version"] == "0.5.17").all()
    assert table["hardware"].str.startswith("NVIDIA H100 80GB HBM3").all()
    # SGLang's own quantities: its KV pool from /server_info, weights from /metrics,
    # its radix cache's hits over each point from its counters
    assert (table["kv_cache_tokens"] == 410380).all() and (table["weights_gib"] == 15.02).all()
    assert table["prefix_cache_hit_rate"].between(0, 1).all()
    assert table["itl_p50_ms"].between(5, 10).all() and table["output_throughput_tps"].is_monotonic_increasing


TWO_GPUS = Path(__file__).parents[1] / "data/recorded_gpu/h100x2_20261126b"


def test_p_d_points_carry_their_kv_transfers_from_the_decode_servers_counters(tmp_path):
    # week 16 (vLLM 0.26 P/D over NIXL) on two lent H100s: one transfer per request, the
    # whole prompt's KV each time (the 8B shape's 128 KiB per token)
    table = metrics.table(sorted((TWO_GPUS / "week16_run/sessions").glob("*.json")), TWO_GPUS / "week16_run/store")
    table = table.sort_values("random_input_len")
    assert table["valid"].all() and (table["kv_transfers"] == table["completed"]).all()
    assert (table["kv_failed_transfers"] == 0).all()
    per_token_mib = table["kv_transfer_mb"] / table["random_input_len"]
    assert per_token_mib.between(0.12, 0.13).all(), per_token_mib
    assert (table["kv_transfer_p90_ms"] >= table["kv_transfer_mean_ms"]).all()
    out = plots.draw(table, {"x": "random_input_len", "y": ["kv_transfer_mean_ms", "kv_transfer_p90_ms"],
                             "xlabel": "Prompt length (tokens)", "ylabel": "KV transfer time (ms)",
                             "title": "KV transfer per request"}, tmp_path / "kv.png")
    assert mpimg.imread(out).shape[0] > 200


def test_data_parallel_points_replay_into_rows_with_their_recorded_hit_rates():
    # week 9's two SGLang replicas behind sglang_router.launch_router (SGLang 0.5.17); the
    # summing over replicas itself is tested in tests/serve/test_conditions.py
    table = metrics.table(sorted((TWO_GPUS / "week09_dp_run/sessions").glob("*.json")),
                          TWO_GPUS / "week09_dp_run/store").set_index("server_point")
    assert sorted(table.index) == ["router_policy=cache_aware", "router_policy=round_robin"]
    assert table["valid"].all() and (table["completed"] == 16).all()
    assert (table["engine_version"] == "0.5.17").all()
    assert table["prefix_cache_hit_rate"].round(3).to_dict() == {"router_policy=cache_aware": 0.889,
                                                                 "router_policy=round_robin": 0.83}


SGLANG_PD = Path(__file__).parents[1] / "data/recorded_gpu/h100x2_20261126c"


def sglang_pd_table(name: str):
    run = SGLANG_PD / f"{name}_run"
    return metrics.table(sorted((run / "sessions").glob("*.json")), run / "store").sort_values("random_input_len")


def test_sglang_p_d_pairs_serve_and_mooncake_over_tcp_pays_for_the_prompts_kv_in_ttft():
    # week16_sglang (mooncake, which found no RDMA device) and week16_sglang_nixl (UCX) on
    # two lent H100s, SGLang 0.5.17: every point valid; decode steps alike; TTFT apart
    mooncake, nixl = sglang_pd_table("week16_sglang"), sglang_pd_table("week16_sglang_nixl")
    for table in (mooncake, nixl):
        assert table["valid"].all() and (table["completed"] == 16).all()
        assert list(table["random_input_len"]) == [512, 2048, 4096]
        assert (table["engine_version"] == "0.5.17").all()
    assert (abs(mooncake["itl_p50_ms"].values / nixl["itl_p50_ms"].values - 1) < 0.05).all()
    ratio = mooncake["ttft_p50_ms"].values / nixl["ttft_p50_ms"].values
    assert ratio[-1] > 5 and ratio[-1] > ratio[0], ratio
    # the decode log states the fallback, and the table warns of it
    facts = server_log.read_facts(SGLANG_PD / "sglang0517_pd_decode_mooncake.log", ENGINES["sglang"])
    assert any("mooncake over TCP" in w for w in checks.condition_warnings(facts))
    nixl_facts = server_log.read_facts(SGLANG_PD / "sglang0517_pd_decode_nixl.log", ENGINES["sglang"])
    assert not checks.condition_warnings(nixl_facts)


def test_graphs_vs_eager_and_precisions_with_three_repeats_give_the_recorded_verdicts():
    # week 10 and week 12 with `repeats=3` on a lent H100 (vLLM 0.26.0, random weights):
    # the comparisons table recomputed from the metrics table is the one the run wrote
    for name, knobs in (("week10", ["max_concurrency"]), ("week12", [])):
        table = pd.read_csv(SGLANG_PD / f"{name}.csv")
        assert (table["repeats"] == 3).all()
        recorded = pd.read_csv(SGLANG_PD / f"{name}_comparisons.csv")
        again = comparisons.compare(table, knobs)
        # the run's "not distinguishable" now reads undecided or equivalent (TOST); the rest unchanged
        assert [v if v in ("better", "worse") else "tie" for v in again["verdict"]] == \
            [v if v in ("better", "worse") else "tie" for v in recorded["verdict"]]
        assert (abs(again["diff_pct"] - recorded["diff_pct"]) < 1e-6).all()
    week10 = pd.read_csv(SGLANG_PD / "week10_comparisons.csv")
    throughput = week10[week10["metric"] == "output_throughput_tps"]
    assert (throughput["verdict"] == "better").all() and len(throughput) == 4   # graphs at every batch size
    week12 = pd.read_csv(SGLANG_PD / "week12_comparisons.csv").set_index(["configuration", "metric"])
    assert week12.loc[("model=llama31_8b_fp8", "output_throughput_tps"), "verdict"] == "better"
    assert week12.loc[("model=llama31_8b_awq", "ttft_p50_ms"), "verdict"] == "not distinguishable"
    again = comparisons.compare(pd.read_csv(SGLANG_PD / "week12.csv"), []).set_index(["configuration", "metric"])
    # AWQ's TTFT over 3 repeats: the interval too wide to call it equal within 5 %, or not
    assert again.loc[("model=llama31_8b_awq", "ttft_p50_ms"), "verdict"] == comparisons.UNDECIDED
