"""A service-level objective and whether one measured point meets it.

An SLO is {metric: limit} over the benchmark's own statistics, `{stat}_{latency}_ms`
(stat mean, median, p50, p90, p99; latency ttft, tpot, itl, e2el: the names `vllm bench
serve` and SGLang's bench_serving save), plus `max_failed`, the failed requests a point
may have (0 when not given). A point the engine or client failed meets no SLO.

A point at a request rate meets it only where it held that rate (`unheld`): its arrivals
outlasted the median request, and its queue did not grow. Else a few prompts at a high rate
arrive as one burst, all in flight at once, and "meet" an SLO at a rate the engine never
served (seen on 2x H200: docs/measurements.md, "Figures behind the code's choices").
"""

from __future__ import annotations

import math
import numbers
import re

from servelab.search import steady_window
from servelab.search.steady_window import TTFT_TREND_LIMIT

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
    """(met, margins {metric: limit - value, in the metric's unit}, why not). Latencies are
    judged over the held window where the point had one (servelab.search.steady_window)."""
    if failure or bench is None:
        reason = f"{failure['stage']}: {failure['reason']}" if failure else "no result"
        return False, {}, f"point failed ({reason})"
    margins, missed = {}, []
    steady = steady_window.window(bench)
    figures = steady_window.held(bench, steady)
    for key, limit in slo.items():
        if key == MAX_FAILED:
            continue
        value = statistic(figures, key)
        if value is None:
            missed.append(f"{key} not in the result")
            continue
        margins[key] = limit - value
        if value > limit:
            missed.append(f"{key} {value:.1f} > {limit:g}")
    failed = int(bench.get("failed") or 0)
    if failed > slo.get(MAX_FAILED, 0):
        missed.append(f"{failed} failed request(s) > {slo.get(MAX_FAILED, 0)}")
    if not missed and (why := unheld(bench, steady)):
        missed.append(why)
    return not missed, margins, "; ".join(missed)


def ttft_trend(bench: dict) -> float | None:
    """Mean TTFT of the last third of requests (in send order) over the first third's:
    ~1 in a steady state, rising when the server cannot keep up (over-saturation)."""
    ttfts, starts = bench.get("ttfts") or [], bench.get("start_times") or []
    ordered = [t for _, t in sorted(zip(starts, ttfts))] if len(starts) == len(ttfts) else list(ttfts)
    return steady_window.ttft_trend(ordered)


def unheld(bench: dict, steady: dict | None = None) -> str | None:
    """Why a saved result at a request rate did not hold that rate, or None (`not_held`).
    Where the result has per-request records, the held window decides: too short to judge,
    or a queue that grew inside it (a ramp's rise before the window is no growing queue).
    `steady`: its `steady_window.window`, where the caller has it already."""
    starts = bench.get("start_times") or []
    rate, median_e2e = bench.get("request_rate"), bench.get("median_e2el_ms")
    if len(starts) > 1:
        span_s = max(starts) - min(starts)
    else:   # a client that saves no send times (SGLang's): its schedule's span at the rate asked
        starts = range(int(bench.get("completed") or 0) + int(bench.get("failed") or 0))
        span_s = (len(starts) - 1) / rate if is_rate(rate) and rate > 0 and len(starts) > 1 else None
    steady = steady or steady_window.window(bench)
    if steady is None:
        return not_held(rate, len(starts), span_s, median_e2e, trend=ttft_trend(bench))
    if (why := not_held(rate, len(starts), span_s, median_e2e, trend=None)):
        return why
    return f"not held: no steady state ({steady['no_steady_state']})" if is_rate(rate) and steady["no_steady_state"] \
        else None


def not_held(rate, arrivals: int, span_s: float | None, median_e2e_ms: float | None,
             *, trend: float | None) -> str | None:
    """Why a point at a request rate did not hold that rate, or None. Necessary, not
    sufficient: a `burst`, or a last third's TTFT over `TTFT_TREND_LIMIT` times the first
    third's (a queue that grew). A closed-loop point (a concurrency, no rate) is not judged here."""
    if (why := burst(rate, arrivals, span_s, median_e2e_ms)):
        return f"not held: {why}"
    if not is_rate(rate):
        return None
    if trend is not None and trend > TTFT_TREND_LIMIT:
        return f"not held: TTFT rose x{trend:.1f} from the first to the last third of the requests (the queue grew)"
    return None


def burst(rate, arrivals: int, span_s: float | None, median_e2e_ms: float | None) -> str | None:
    """Where a point at a request rate was one burst, what shows it, else None: its arrivals
    ended before the median request did, so every request could be in flight at once,
    whatever the rate asked (more prompts measure the rate)."""
    if not is_rate(rate) or span_s is None or not median_e2e_ms or span_s >= median_e2e_ms / 1000:
        return None
    return (f"{arrivals} requests arrived in {span_s:.2f}s, under the median request's "
            f"{median_e2e_ms / 1000:.2f}s (one burst, not {rate:g} req/s; more prompts measure it)")


def is_rate(rate) -> bool:
    return isinstance(rate, numbers.Real) and not isinstance(rate, bool) and math.isfinite(rate)
