"""An SLO and whether a saved benchmark result meets it."""
from servelab.search import slo


def test_a_point_meets_the_slo_only_under_every_limit_and_without_failed_requests():
    limits = {"p99_ttft_ms": 500, "p99_itl_ms": 50}
    ok, margins, why = slo.judge(limits, {"p99_ttft_ms": 420.0, "p99_itl_ms": 31.0, "failed": 0})
    assert ok and why == "" and margins == {"p99_ttft_ms": 80.0, "p99_itl_ms": 19.0}
    ok, margins, why = slo.judge(limits, {"p99_ttft_ms": 620.0, "p99_itl_ms": 31.0, "failed": 0})
    assert not ok and "p99_ttft_ms 620.0 > 500" in why and margins["p99_ttft_ms"] == -120.0
    ok, _, why = slo.judge(limits, {"p99_ttft_ms": 1.0, "p99_itl_ms": 1.0, "failed": 2})
    assert not ok and "2 failed request(s) > 0" in why
    assert slo.judge({**limits, "max_failed": 2}, {"p99_ttft_ms": 1.0, "p99_itl_ms": 1.0, "failed": 2})[0]


def test_p50_reads_the_median_the_client_saves_and_a_missing_statistic_fails():
    assert slo.judge({"p50_ttft_ms": 10}, {"median_ttft_ms": 9.0})[0]
    ok, _, why = slo.judge({"p99_e2el_ms": 10}, {"median_ttft_ms": 9.0})
    assert not ok and "p99_e2el_ms not in the result" in why


def test_a_failed_point_meets_no_slo_and_says_why():
    ok, _, why = slo.judge({"p99_ttft_ms": 500}, None, {"stage": "server start-up", "reason": "ValueError: x"})
    assert not ok and why == "point failed (server start-up: ValueError: x)"


def test_bad_slos_are_named_by_key():
    assert slo.check({"p99_ttft_ms": 500, "max_failed": 0}) == []
    problems = slo.check({"p95_ttft_ms": 500, "max_failed": -1})
    assert any("'p95_ttft_ms' is not a limit servelab knows" in p for p in problems)
    assert any(p.startswith("names no latency limit") for p in problems)
    assert any("max_failed: -1" in p for p in problems)
    assert any("p99_itl_ms: 0" in p for p in slo.check({"p99_itl_ms": 0}))


def rate_point(rate: float, span_s: float, median_e2e_ms: float, ttfts=None) -> dict:
    """A saved result at a request rate: 100 arrivals over span_s, SLO limits well met."""
    n = 100
    return {"request_rate": rate, "p99_ttft_ms": 200.0, "p99_itl_ms": 20.0, "failed": 0,
            "median_e2el_ms": median_e2e_ms, "start_times": [span_s * i / (n - 1) for i in range(n)],
            "ttfts": ttfts or [0.1] * n}


def test_a_rate_point_whose_requests_all_arrived_within_one_request_did_not_hold_the_rate():
    """100 requests in 0.78 s against a median request of 2.4 s (a lent H200, 2026-11-28):
    every request was in flight at once, so the point measured one burst, not 128 req/s."""
    limits = {"p99_ttft_ms": 500, "p99_itl_ms": 50}
    ok, margins, why = slo.judge(limits, rate_point(128, 0.78, 2400))
    assert not ok and margins == {"p99_ttft_ms": 300.0, "p99_itl_ms": 30.0}
    assert why == ("not held: 100 requests arrived in 0.78s, under the median request's 2.40s "
                   "(one burst, not 128 req/s; more prompts measure it)")
    # the same limits, arrivals over 6.2 s: the rate was held
    assert slo.judge(limits, rate_point(16, 6.2, 2400)) == (True, margins, "")


def test_a_rate_point_whose_queue_grew_did_not_hold_the_rate():
    rising = [0.1] * 34 + [0.2] * 33 + [0.35] * 33       # the last third's TTFT 3.5x the first's
    ok, _, why = slo.judge({"p99_ttft_ms": 500}, rate_point(20, 6.0, 2400, rising))
    assert not ok and why == "not held: TTFT rose x3.5 from the first to the last third of the requests (the queue grew)"
    steady = [0.1, 0.12, 0.11] * 33 + [0.1]
    assert slo.judge({"p99_ttft_ms": 500}, rate_point(20, 6.0, 2400, steady))[0]


def test_a_missed_limit_is_named_before_the_load_and_a_concurrency_point_is_not_judged_on_it():
    ok, _, why = slo.judge({"p99_ttft_ms": 100}, rate_point(128, 0.78, 2400))
    assert not ok and why == "p99_ttft_ms 200.0 > 100"
    for unlimited in ("inf", float("inf")):    # a closed loop: the client's concurrency sets the load
        assert slo.judge({"p99_ttft_ms": 500}, {**rate_point(128, 0.78, 2400), "request_rate": unlimited})[0]
