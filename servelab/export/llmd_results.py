"""The results side of an llm-d report (servelab.export.llmd): a point's request
statistics, throughput, the engine's counters and how servelab judged it, and its
components' health, from the point's row of the table and its pooled raw results."""

from __future__ import annotations

import math

from servelab.analysis.columns import LATENCIES, STATS

# the table's latency columns (servelab.analysis.columns) -> the report's latency statistics and their units
LATENCY = dict(zip(LATENCIES, (("time_to_first_token", "s"), ("time_per_output_token", "s/token"),
                               ("inter_token_latency", "s/token"), ("request_latency", "s"))))
THROUGHPUT = {"output_throughput_tps": ("output_token_rate", "tokens/s"),
              "total_token_throughput_tps": ("total_token_rate", "tokens/s"),
              "request_throughput_rps": ("request_rate", "queries/s")}
# the engine's counters over the point (servelab.serve.conditions) and their units
COUNTERS = {"peak_kv_cache_usage": "fraction", "prefix_cache_hit_rate": "fraction", "preemptions": "count",
            "kv_transfers": "count", "kv_failed_transfers": "count", "kv_transfer_mb": "MB",
            "kv_transfer_mean_ms": "ms", "kv_transfer_p90_ms": "ms", "spec_acceptance_rate": "fraction",
            "spec_mean_accepted_len": "count"}

def value(row: dict, column: str):
    """A cell, None where it is empty (NaN) or not a finite number where one is expected."""
    v = row.get(column)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return v


def number(row: dict, column: str, scale: float = 1.0) -> float | None:
    v = value(row, column)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v) * scale


def total_input_tokens(row: dict, knobs: dict) -> float | None:
    """The prompts' tokens as the client counted them; else the total less the output tokens
    (static batching, `vllm bench throughput` counts both together, the latter with a fixed
    output length a request); None where nothing counted them."""
    if (found := number(row, "total_input_tokens")) is not None:
        return found
    total, out, done = number(row, "total_tokens"), number(row, "total_output_tokens"), number(row, "completed")
    if total is not None and out is not None:
        return total - out
    fixed = next((knobs[k] for k in ("output_len", "random_output_len") if isinstance(knobs.get(k), int)), None)
    if total is not None and done and fixed is not None:
        return total - done * fixed
    return None


def statistics(row: dict, prefix: str, units: str, scale: float, requests: dict | None = None) -> dict | None:
    """A latency's statistics (None without a mean: the schema requires one). Over the point's
    requests where the raw results keep them (pooled.from_raws): a repeated point's pooled; a
    single point's the client's own, with the stddev, min and max of its requests. Else the
    table's: a repeated point's the mean of its repeats' figures."""
    spread = (requests or {}).get("pooled", {}).get(prefix)
    if spread and requests["repeats"] > 1:
        return {"units": units, **{k: v * scale for k, v in spread.items()}}
    found = {s: number(row, f"{prefix}_{s}_ms", scale) for s in STATS}
    if found["mean"] is None:
        return None
    out = {"units": units, **{s: v for s, v in found.items() if v is not None}}
    if spread:
        out.update({k: spread[k] * scale for k in ("stddev", "min", "max") if k in spread})
    return out


def request_performance(row: dict, knobs: dict, requests: dict | None = None) -> dict | None:
    sent = value(row, "prompts_sent")
    completed, failed = value(row, "completed"), value(row, "failed")
    counts = {}
    if completed is not None:   # an offline latency batch counts no requests
        counts["total"] = int(sent) if sent is not None else int(completed) + int(failed or 0)
        if failed is not None:
            counts["failures"] = int(failed)
        # sent but neither completed nor failed: a point sized in time cut them at its end
        if sent is not None and (left := int(sent) - int(completed) - int(failed or 0)) > 0:
            counts["incomplete"] = left
        for total, name in ((total_input_tokens(row, knobs), "input_length"),
                            (number(row, "total_output_tokens"), "output_length")):
            if total is not None and completed:
                counts[name] = {"units": "count", "mean": total / completed}
    latency = {name: s for lat, (name, units) in LATENCY.items()
               if (s := statistics(row, lat, units, 1e-3, requests)) is not None}
    throughput = {name: {"units": units, "mean": v} for column, (name, units) in THROUGHPUT.items()
                  if (v := number(row, column)) is not None}
    total, out = number(row, "total_token_throughput_tps"), number(row, "output_throughput_tps")
    if total is not None and out is not None:
        throughput["input_token_rate"] = {"units": "tokens/s", "mean": total - out}
    aggregate = {**({"requests": counts} if counts else {}), **({"latency": latency} if latency else {}),
                 **({"throughput": throughput} if throughput else {})}
    return {"aggregate": aggregate} if aggregate else None


def batch_latency(row: dict, knobs: dict) -> dict | None:
    """An offline `vllm bench latency` point: one batch's latency (s) over its iterations,
    not a request's: it has no place among the request statistics."""
    if (mean := number(row, "latency_mean_s")) is None:
        return None
    return {"batch_size": knobs.get("batch_size"), "iterations": value(row, "samples_latency"), "mean": mean,
            **{s: v for s in ("p50", "p90", "p99") if (v := number(row, f"latency_{s}_s")) is not None}}


def how_computed(row: dict, requests: dict | None) -> str:
    repeats = int(value(row, "repeats") or 1)
    if requests and requests.get("pooled"):
        return (f"over the {requests['requests']} requests of its {repeats} repeats pooled" if repeats > 1
                else f"the client's, over its {requests['requests']} requests")
    return f"the mean of its {repeats} repeats' own figures" if repeats > 1 else "the client's"


def repeat_figures(requests: dict | None) -> dict:
    """Each repeat's own latency figures (s), beside the pooled ones: {ttft_p99: [r1, r2, ...]}."""
    per = (requests or {}).get("per_repeat") or []
    if len(per) < 2:
        return {}
    return {f"{lat}_{s}": [r[lat][s] / 1000 for r in per] for lat in LATENCY for s in STATS
            if all(lat in r for r in per)}


def observability(row: dict, label: str, knobs: dict | None = None, requests: dict | None = None) -> dict:
    """The engine's counters over the point: the prefix-cache hit rate where the schema has a
    statistic for it, every counter under `engine_counters` (observability takes keys of a
    tool's own); how servelab judged the point under `servelab_point`."""
    counters = {}
    for column, units in COUNTERS.items():
        if (v := number(row, column)) is not None:
            name, unit = (column[:-3], "s") if units == "ms" else (column, units)
            counters[name] = {"value": v / 1000 if units == "ms" else v, "units": unit}
    out = {}
    if "prefix_cache_hit_rate" in counters:
        out["components"] = [{"component_label": label, "aggregate": {
            "cache_hit_rate": {"units": "fraction", "mean": counters["prefix_cache_hit_rate"]["value"]}}}]
    if counters:
        out["engine_counters"] = {"component_label": label, **counters}
    judged = {"valid": bool(value(row, "valid")) if value(row, "valid") is not None else None,
              "invalid_reason": value(row, "invalid_reason"), "warnings": value(row, "warnings"),
              "window": value(row, "window"), "repeats": int(value(row, "repeats") or 1),
              "ci95_s": {c[:-8].replace("_ms", "_s"): v / 1000 for c in row if c.endswith("_ms_ci95")
                         if (v := number(row, c)) is not None},
              "steady_window": steady(row), "latency_statistics": how_computed(row, requests),
              "repeat_figures_s": repeat_figures(requests), "batch_latency_s": batch_latency(row, knobs or {}),
              "peak_rss_gib": number(row, "peak_rss_gib"), "peak_gpu_mem_gib": number(row, "peak_gpu_mem_gib")}
    out["servelab_point"] = {k: v for k, v in judged.items() if v not in (None, "", {})}
    return out


def steady(row: dict) -> dict:
    """The held window's figures (servelab.search.steady_window), latencies in s."""
    out = {"window_s": number(row, "steady_window_s"), "requests": number(row, "steady_requests"),
           **{f"{lat}_{s}": number(row, f"steady_{lat}_{s}_ms", 1e-3) for lat in LATENCY for s in STATS},
           **{c: number(row, f"steady_{c}") for c in THROUGHPUT}}
    return {k: v for k, v in out.items() if v is not None}


def component_health(record: dict, label: str) -> list[dict]:
    failure = record.get("failure")
    restarts = record["client_knobs"].get("restart")
    replica = {"replica_id": str(record.get("session") or record["server_point"]), "healthy": failure is None}
    if isinstance(restarts, int) and restarts >= 0:
        replica["restarts"] = restarts
    log = (failure or {}).get("log") or (f"store/sessions/{record['session']}/server.log" if record.get("session")
                                         else None)
    if log:
        replica["logs"] = str(log)
    return [{"component_label": label, "failed_replicas": int(failure is not None),
             **({"total_restarts": restarts} if "restarts" in replica else {}), "replica_health": [replica]}]
