"""A point's latency statistics over its requests, from the raw results in the store.

The table gives a repeated point the mean of its repeats' figures (a mean of p99s is not a
p99); a report gives its requests' own distribution: every repeat's requests pooled, and
each repeat's figures beside it. The per-request figures are those the client computed its
own from (vLLM's saved `ttfts`, `itls`, `output_lens`, `errors`): TTFT; ITL, every gap;
E2EL = TTFT + the gaps; TPOT = the gaps / (output tokens - 1). On a single point they give
the client's own statistics to its microsecond rounding (tests/export/test_pooled.py).
"""

from __future__ import annotations

import numpy as np

LATENCIES = ("ttft", "tpot", "itl", "e2el")
PERCENTILES = (50, 90, 99)


def request_figures(raw: dict) -> dict[str, list[float]] | None:
    """{latency: per-request values in ms} of the requests that completed; None where the
    raw result keeps no per-request lists (an offline batch, an AIPerf point)."""
    ttfts, itls = raw.get("ttfts"), raw.get("itls")
    if not isinstance(ttfts, list) or not isinstance(itls, list) or len(itls) != len(ttfts):
        return None
    errors = raw.get("errors") or [""] * len(ttfts)
    outputs = raw.get("output_lens") or [None] * len(ttfts)
    out = {lat: [] for lat in LATENCIES}
    for ttft, gaps, error, tokens in zip(ttfts, itls, errors, outputs):
        if error:
            continue
        out["ttft"].append(ttft * 1e3)
        out["itl"].extend(g * 1e3 for g in gaps)
        out["e2el"].append((ttft + sum(gaps)) * 1e3)
        if isinstance(tokens, int) and tokens > 1:
            out["tpot"].append(sum(gaps) / (tokens - 1) * 1e3)
    return out


def statistics(values: list[float]) -> dict | None:
    """mean, stddev (over the requests, as the client's own), min, max and percentiles in ms."""
    if not values:
        return None
    a = np.asarray(values, dtype=float)
    return {"mean": float(a.mean()), "stddev": float(a.std()), "min": float(a.min()), "max": float(a.max()),
            **{f"p{p}": float(np.percentile(a, p)) for p in PERCENTILES}}


def client_spread(raw: dict) -> dict | None:
    """A point without per-request lists: the stddev, min and max its client computed (AIPerf's
    `std`, `min`, `max`, kept as `std_ttft_ms`...), in from_raws' shape."""
    spread = {lat: {name: raw[f"{key}_{lat}_ms"] for name, key in (("stddev", "std"), ("min", "min"), ("max", "max"))
                    if isinstance(raw.get(f"{key}_{lat}_ms"), (int, float))} for lat in LATENCIES}
    spread = {lat: s for lat, s in spread.items() if s}
    if not spread:
        return None
    return {"requests": raw.get("completed"), "repeats": 1, "pooled": spread, "per_repeat": []}


def from_raws(raws: list[dict]) -> dict | None:
    """{"requests", "repeats", "pooled": {lat: stats}, "per_repeat": [{lat: stats}]}; None
    where any repeat lacks per-request lists (then nothing is pooled)."""
    figures = [request_figures(raw) for raw in raws]
    if len(raws) == 1 and figures[0] is None:
        return client_spread(raws[0])
    if not figures or any(f is None for f in figures):
        return None
    pooled = {lat: s for lat in LATENCIES if (s := statistics([v for f in figures for v in f[lat]])) is not None}
    return {"requests": sum(len(f["ttft"]) for f in figures), "repeats": len(raws), "pooled": pooled,
            "per_repeat": [{lat: s for lat in LATENCIES if (s := statistics(f[lat])) is not None} for f in figures]}
