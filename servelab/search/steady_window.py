"""The window of a load point in which its load held, and its figures over that window.

A point's whole-run figures mix three phases: the ramp (the first requests find an empty
server), the held load, and the drain (no more arrivals, the last requests finish alone).
On a GPU much faster than the one a config was written for, ramp and drain are most of
the run. The window here starts one median request after the first arrival (by then the
server holds what the load puts in flight: Little's law, in-flight = rate x request time)
and ends at the last arrival (after it, in-flight only falls). The load held where the
server kept up inside it: it completed about as many requests as arrived, and TTFT did
not climb from the window's first third to its last. Its figures come from the
client's per-request records (`vllm bench serve --save-detailed`: send times, TTFT,
inter-token gaps, latency, lengths), in the saved result's own key names, so that the SLO
judge, goodput and the tables read them as they read a whole run.
"""

from __future__ import annotations

import math
import statistics

# fewer requests than this started inside the window: too few to judge a steady state
from servelab.config.experiments import HELD_MIN_REQUESTS as MIN_REQUESTS
# the last third's mean TTFT over the first third's: above this the queue grew
TTFT_TREND_LIMIT = 2.0
# requests completed over requests arrived inside the window: below this the queue grew
# (the server fell behind its arrivals). Its ramp leaves the longest requests of the first
# ones still to come in: at a prompt-length range of +-40 % that is under 10 % of a window
# one ramp long, so that this line sits well clear of it.
COMPLETION_SHORTFALL = 0.8


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default, as the clients use)."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def ttft_trend(ttfts_in_send_order: list[float]) -> float | None:
    """Mean TTFT of the last third over the first third's (None under 9 requests)."""
    if len(ttfts_in_send_order) < 9:
        return None
    third = len(ttfts_in_send_order) // 3
    first = sum(ttfts_in_send_order[:third]) / third
    return sum(ttfts_in_send_order[-third:]) / third / first if first > 0 else None


def requests(bench: dict) -> list[dict] | None:
    """The successful requests' records (seconds), in send order; None where the result
    has no per-request send times or latencies (an engine's client that saves none)."""
    itls = bench.get("itls")
    latencies = bench.get("latencies")
    if latencies is None and isinstance(itls, list) and isinstance(bench.get("ttfts"), list):
        # vLLM 0.26's client saves no latencies: a streamed request ends at its last token
        latencies = [t + sum(gaps or []) if t else 0.0 for t, gaps in zip(bench["ttfts"], itls)]
    columns = [bench.get("start_times"), bench.get("ttfts"), latencies, bench.get("output_lens")]
    if any(not isinstance(c, list) for c in columns) or len({len(c) for c in columns}) != 1:
        return None
    errors = bench.get("errors") or [""] * len(columns[0])
    itls = itls or [[] for _ in columns[0]]
    inputs = bench.get("input_lens") or [0] * len(columns[0])
    out = [{"start": s, "ttft": t, "latency": lat, "output": n, "itls": gaps or [], "input": i}
           for s, t, lat, n, gaps, i, err in zip(*columns, itls, inputs, errors) if not err and lat and lat > 0]
    return sorted(out, key=lambda r: r["start"])


def tokens_in(req: dict, start: float, end: float) -> float:
    """Output tokens of one request generated inside [start, end]: the first at its TTFT,
    the rest at its streamed chunks' times (spread evenly over the chunks)."""
    first = req["start"] + req["ttft"]
    count = 1.0 if start <= first <= end else 0.0
    rest = max(req["output"] - 1, 0)
    if not rest:
        return count
    if req["itls"]:
        per_chunk, t = rest / len(req["itls"]), first
        for gap in req["itls"]:
            t += gap
            count += per_chunk if start <= t <= end else 0.0
        return count
    last = req["start"] + req["latency"]   # no chunk times: the decode spread evenly
    overlap = max(0.0, min(end, last) - max(start, first))
    return count + (rest * overlap / (last - first) if last > first else (rest if start <= last <= end else 0))


def open_loop(bench: dict) -> bool:
    """Requests sent at a rate, not each on a completion. In a closed loop (rate inf and a
    concurrency, or a rate whose concurrency cap the client reached) the server's queue cannot
    grow past the cap, and TTFT rises over the first waves for another reason: the requests,
    sent together, drift apart and each then waits for the others' decode steps (seen on the
    CPU default at 8 in flight, and at seed 002's 50 req/s capped at 250 on an H200)."""
    rate, cap = bench.get("request_rate"), bench.get("max_concurrency")
    if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not math.isfinite(rate):
        return False
    return not (cap and (bench.get("max_concurrent_requests") or 0) >= cap)


def window(bench: dict) -> dict | None:
    """The held window of a saved result and its figures, or None where the result has
    no per-request records. A window too short to judge has `no_steady_state` (why) and
    no figures; one where the queue grew has both."""
    reqs = requests(bench)
    if not reqs:
        return None
    t0, last_arrival = reqs[0]["start"], reqs[-1]["start"]
    ramp = statistics.median(r["latency"] for r in reqs)
    start, end = t0 + ramp, last_arrival
    inside = [r for r in reqs if start <= r["start"] <= end]
    out = {"window_start_s": round(ramp, 3), "window_end_s": round(end - t0, 3),
           "window_s": round(max(end - start, 0.0), 3), "window_requests": len(inside), "no_steady_state": None}
    if end - start < ramp or len(inside) < MIN_REQUESTS:
        out["no_steady_state"] = (f"the load held {max(end - start, 0):.1f}s after a {ramp:.1f}s ramp, "
                                  f"{len(inside)} request(s) sent in it (too short to judge: at least one "
                                  f"ramp and {MIN_REQUESTS} requests; a longer duration_s measures it)")
        return out
    span = end - start
    ttfts = [r["ttft"] for r in inside]
    trend = out["ttft_trend"] = ttft_trend(ttfts)
    completed = sum(start <= r["start"] + r["latency"] <= end for r in reqs)
    if completed < COMPLETION_SHORTFALL * len(inside):
        out["no_steady_state"] = (f"the queue grew: {completed / span:.1f} req/s completed of the "
                                  f"{len(inside) / span:.1f} req/s that arrived while the load held")
    elif open_loop(bench) and trend is not None and trend > TTFT_TREND_LIMIT:
        out["no_steady_state"] = f"TTFT rose x{trend:.1f} from the first to the last third of the held window"
    output_tokens = sum(tokens_in(r, start, end) for r in reqs)
    input_tokens = sum(r["input"] for r in reqs if start <= r["start"] + r["ttft"] <= end)
    out.update(output_throughput=output_tokens / span, request_throughput=completed / span,
               total_token_throughput=(output_tokens + input_tokens) / span)
    samples = {"ttft": ttfts, "e2el": [r["latency"] for r in inside],
               "tpot": [(r["latency"] - r["ttft"]) / (r["output"] - 1) for r in inside if r["output"] > 1],
               "itl": [gap for r in inside for gap in r["itls"]]}
    for name, values in samples.items():
        if not values:
            continue
        out[f"mean_{name}_ms"] = 1000 * statistics.fmean(values)
        for q in (50, 90, 99):
            out[f"p{q}_{name}_ms"] = 1000 * percentile(values, q)
        out[f"median_{name}_ms"] = out[f"p50_{name}_ms"]
    return out


def held(bench: dict | None, steady: dict | None = None) -> dict | None:
    """A saved result with its held window's figures in place of the whole run's, where
    the window holds a steady state; the result as it is otherwise (`window` says which).
    `steady`: its `window`, where the caller has it already."""
    if bench is None:
        return None
    steady = steady or window(bench)
    if not steady or steady["no_steady_state"] or "output_throughput" not in steady:
        return {**bench, "window": "whole run"}
    return {**bench, **steady, "window": "steady"}
