"""What an SGLang 0.5.17 server states at start-up (KV pool, weight memory, how a P/D role
moves the KV cache), from its log, /metrics and /server_info: recordings of real servers on
H100s (tests/data/recorded_gpu/)."""
from pathlib import Path

from servelab.engines import server_log
from servelab.engines.registry import ENGINES
from servelab.engines.sglang import startup_log as sglang_log

GPU = Path(__file__).parents[1] / "data/recorded_gpu"
TWO_GPUS = GPU / "h100x2_20261126b"   # a lent machine with two H100s, 2026-11-26 16:00-16:24
SGLANG_PD = GPU / "h100x2_20261126c"   # the same kind of machine, 2026-11-26 18:58-19:12


def test_recorded_sglang0517_h100_log_gives_kv_capacity_and_weights():
    # a real start-up of SGLang 0.5.17 on a lent H100 (8B shape, dummy weights), 2026-11-26
    text = (GPU / "sglang0517_h100_server.log").read_text()
    facts = sglang_log.log_facts(text)
    assert facts["kv_cache_tokens"] == 410380 and facts["weights_gib"] == 15.02
    assert "startup_compile_s" not in facts      # vLLM's phases are not SGLang's lines


def test_sglang_server_info_and_metrics_constants():
    # /server_info: server args, scheduler info and per-replica internal states merged
    info = {"schedule_policy": "lpm", "disaggregation_mode": "null", "disaggregation_transfer_backend": "mooncake",
            "max_total_num_tokens": 410380, "internal_states": [{"max_total_num_tokens": 1}]}
    assert sglang_log.info_facts(info) == {"kv_cache_tokens": 410380, "schedule_policy": "lpm"}
    # data parallelism: each replica's pool, in internal_states; a P/D role names its backend
    info = {"disaggregation_mode": "decode", "disaggregation_transfer_backend": "nixl",
            "internal_states": [{"max_total_num_tokens": 200000}, {"max_total_num_tokens": 200000}]}
    assert sglang_log.info_facts(info) == {"kv_cache_tokens": 200000, "disaggregation_mode": "decode",
                                          "kv_transfer_backend": "nixl"}
    metrics = ('# TYPE sglang:max_total_num_tokens gauge\n'
               'sglang:max_total_num_tokens{engine_type="unified",model_name="m",tp_rank="0"} 410380.0\n'
               'sglang:weight_memory_usage_gb{engine_type="unified",model_name="m",tp_rank="0"} 15.02\n')
    assert sglang_log.metrics_facts(metrics) == {"kv_cache_tokens": 410380, "weights_gib": 15.02}


def test_recorded_sglang_data_parallel_replica_log():
    # one of week 9's two replicas behind sglang_router.launch_router: its own pool
    facts = server_log.read_facts(TWO_GPUS / "sglang0517_dp_replica.log", ENGINES["sglang"])
    assert facts == {"kv_cache_tokens": 413583, "weights_gib": 15.02}


def test_recorded_sglang_decode_logs_state_how_the_kv_cache_moves():
    # week16_sglang: mooncake on a host without RDMA devices falls back to TCP, in its own words
    mooncake = server_log.read_facts(SGLANG_PD / "sglang0517_pd_decode_mooncake.log", ENGINES["sglang"])
    assert mooncake["kv_transport"] == "mooncake over TCP (no HCA detected)"
    nixl = server_log.read_facts(SGLANG_PD / "sglang0517_pd_decode_nixl.log", ENGINES["sglang"])
    assert nixl["kv_transport"] == "nixl over UCX"
    assert mooncake["kv_cache_tokens"] == nixl["kv_cache_tokens"] == 438685
    # a server that moves no KV cache states none
    assert "kv_transport" not in server_log.read_facts(TWO_GPUS / "sglang0517_dp_replica.log", ENGINES["sglang"])
