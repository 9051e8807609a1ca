"""Start-up facts read from a server's log (KV cache capacity, weight memory)."""
from pathlib import Path

from servelab import server_log

DATA = Path(__file__).parent / "data"


def test_cpu_server_log_from_vllm_cpu():
    facts = server_log.read_facts(DATA / "vllm_cpu_server.log")
    assert facts == {"kv_cache_device": "CPU", "kv_cache_tokens": 1048576, "max_concurrency_x": 512.0,
                     "weights_gib": 0.01}


def test_gpu_lines_take_precedence_and_the_first_rank_counts():
    text = ("(Worker_TP0) INFO [gpu_model_runner.py] Model loading took 14.99 GiB memory and 5.1 seconds\n"
            "Checkpoint size: 14.96 GiB.\n"
            "(EngineCore) INFO GPU KV cache size: 207,232 tokens, Maximum concurrency for 4,096 tokens "
            "per request: 50.59x\n"
            "(EngineCore) INFO GPU KV cache size: 1 tokens, Maximum concurrency for 4,096 tokens "
            "per request: 0.01x\n")
    facts = server_log.facts(text)
    assert facts["weights_gib"] == 14.99 and facts["kv_cache_tokens"] == 207232
    assert facts["max_concurrency_x"] == 50.59
    assert server_log.kv_blocks(207232, 16) == 12952
    assert server_log.kv_blocks(207232, None) is None


def test_missing_log_or_lines_give_no_facts(tmp_path):
    assert server_log.read_facts(tmp_path / "absent.log") == {}
    assert server_log.facts("INFO nothing here") == {}
