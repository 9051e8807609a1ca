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
