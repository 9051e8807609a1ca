"""A trace replay's requests by the trace's turn (servelab.analysis.turns): vLLM's client
lists its requests in the trace's order and records no usage per request."""
from servelab.analysis import turns


def test_a_trace_replays_requests_take_the_turn_of_their_trace_line():
    trace = [{"turn": 1, "hash_ids": [1, 2], "input_length": 128}, {"turn": 1, "hash_ids": [5, 6], "input_length": 128},
             {"turn": 2, "hash_ids": [1, 2, 3, 4], "input_length": 256}]
    bench = {"ttfts": [0.2, 0.0, 0.1], "input_lens": [128, 128, 256]}   # the second failed (no TTFT)
    reqs = turns.requests_of(bench, trace)
    assert [(r["turn"], r["ttft_ms"], r["cached_tokens"], r["reusable_tokens"]) for r in reqs] == [
        (1, 200.0, None, 0), (2, 100.0, None, 128)]   # turn 2 repeats turn 1's two blocks of 64
    rows = turns.rows_of("t", "base", None, reqs, 0.3)
    assert [(r["turn"], r["cached_tokens_mean"], r["trace_reusable_tokens_mean"], r["session_prefix_hit_rate"])
            for r in rows] == [(1, None, 0, 0.3), (2, None, 128, 0.3)]
