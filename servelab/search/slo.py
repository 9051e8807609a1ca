"""A service-level objective and whether one measured point meets it.

An SLO is {metric: limit} over the benchmark's own statistics, `{stat}_{latency}_ms`
(stat mean, median, p50, p90, p99; latency ttft, tpot, itl, e2el: the names `vllm bench
serve` and SGLang's bench_serving save), plus `max_failed`, the failed requests a point
may have (0 when not given). A point the engine or client failed meets no SLO.
"""

from __future__ import annotations

import re

METRIC = re.compile(r"^(mean|median|p50|p90|p99)_(ttft|tpot|itl|e2el)_ms$")
MAX_FAILED = "max_failed"


def check(slo: dict) -> list[str]:
    """What is wrong with an SLO, by key."""
    problems = []
    if not any(METRIC.match(k) for k in slo):
        problems.append("names no latency limit (e.g. p99_ttft_ms)")
    for key, limit in slo.items():
        if key != MAX_FAILED and not METRIC.match(key):
            problems.append(f"{key!r} is not a limit servelab knows: {{mean,median,p50,p90,p99}}_"
                            f"{{ttft,tpot,itl,e2el}}_ms or {MAX_FAILED}")
        elif not isinstance(limit, (int, float)) or isinstance(limit, bool) or limit < 0 or \
                (key != MAX_FAILED and limit == 0):
            problems.append(f"{key}: {limit!r} is not a positive number")
    return problems


def statistic(bench: dict, key: str):
    """The statistic `key` of a saved result (p50 is also saved as `median_*`)."""
    if key in bench:
        return bench[key]
    return bench.get(key.replace("p50_", "median_", 1)) if key.startswith("p50_") else None


def judge(slo: dict, bench: dict | None, failure: dict | None = None) -> tuple[bool, dict, str]:
    """(met, margins {metric: limit - value, in the metric's unit}, why not)."""
    if failure or bench is None:
        reason = f"{failure['stage']}: {failure['reason']}" if failure else "no result"
        return False, {}, f"point failed ({reason})"
    margins, missed = {}, []
    for key, limit in slo.items():
        if key == MAX_FAILED:
            continue
        value = statistic(bench, key)
        if value is None:
            missed.append(f"{key} not in the result")
            continue
        margins[key] = limit - value
        if value > limit:
            missed.append(f"{key} {value:.1f} > {limit:g}")
    failed = int(bench.get("failed") or 0)
    if failed > slo.get(MAX_FAILED, 0):
        missed.append(f"{failed} failed request(s) > {slo.get(MAX_FAILED, 0)}")
    return not missed, margins, "; ".join(missed)
