"""What every engine's start-up shares (servelab.engines.server_log): reading a server's log
in its own engine's wording, a missing log or endpoint, and the start-up's columns."""
from pathlib import Path

from servelab.engines import server_log
from servelab.engines.registry import ENGINES
from servelab.engines.vllm import startup_log as vllm_log

GPU = Path(__file__).parents[1] / "data/recorded_gpu"


def test_missing_log_or_lines_give_no_facts(tmp_path):
    assert server_log.read_facts(tmp_path / "absent.log", ENGINES["vllm"]) == {}
    assert vllm_log.log_facts("INFO nothing here") == {}
    assert server_log.scrape_metrics("http://127.0.0.1:9") == ""
    assert server_log.scrape_info("http://127.0.0.1:9", "/server_info") == {}


def test_each_engine_reads_its_own_wording_and_fills_the_records_columns():
    """A log is read in its engine's words only: SGLang's pool line means nothing to vLLM's
    reader, vLLM's cache line nothing to SGLang's; the offline transformers runner states
    nothing. What vLLM's reader times are columns of the record (STARTUP_COLUMNS)."""
    sglang_log, vllm_server = GPU / "sglang0517_h100_server.log", GPU / "vllm026_h100_server.log"
    assert server_log.read_facts(sglang_log, ENGINES["sglang"])["kv_cache_tokens"] == 410380
    assert "kv_cache_tokens" not in server_log.read_facts(sglang_log, ENGINES["vllm"])
    assert server_log.read_facts(vllm_server, ENGINES["vllm"])["kv_cache_tokens"] == 449968
    assert "kv_cache_tokens" not in server_log.read_facts(vllm_server, ENGINES["sglang"])
    assert server_log.read_facts(vllm_server, ENGINES["transformers"]) == {}
    timed = {k for k in server_log.read_facts(vllm_server, ENGINES["vllm"]) if k.startswith("startup_")}
    assert timed and timed <= set(server_log.STARTUP_COLUMNS)
    assert set(vllm_log.STARTUP_PHASES) | set(vllm_log.INIT_SPANS) <= set(server_log.STARTUP_COLUMNS)
