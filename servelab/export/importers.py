"""Runs made by other tools as rows of servelab's table (the columns of results/EXP/metrics.csv
where they mean the same thing), so that they go on the same figure and into the comparisons.

    vllm bench serve --save-result        its saved JSON: the very file servelab's own points
                                          keep, read by servelab.analysis.metrics.bench_row
    AIPerf profile_export_aiperf.json      its aggregate statistics, each with its unit; the shape
                                          read from ai-dynamo/aiperf's JsonExportData
                                          (aiperf/common/models/export_models.py: 1.x at commit
                                          db4f6397d11ee2d4cfbb41f70b2327315163dcf0, schema 1.4 in
                                          the PyPI release 0.13.0)

A file of the wrong shape is refused naming the file and what it lacks.
"""

from __future__ import annotations

import json
from pathlib import Path

from servelab.analysis import checks
from servelab.analysis.metrics import LATENCIES, STATS, bench_row, requested_rate


class ImportFailed(ValueError):
    pass


# vllm bench serve's saved result: what a row needs
VLLM_KEYS = ("completed", "duration", "request_throughput", "output_throughput", "mean_ttft_ms", "p99_ttft_ms")
# AIPerf's statistics -> the table's latency prefixes. AIPerf's inter_token_latency is per request
# (request latency - TTFT) / (output tokens - 1): vLLM's TPOT; its inter_chunk_latency is the gaps
# between streamed chunks, pooled: vLLM's ITL.
AIPERF_LATENCIES = {"time_to_first_token": "ttft", "inter_token_latency": "tpot", "inter_chunk_latency": "itl",
                    "request_latency": "e2el"}
TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "sec": 1e3, "s": 1e3}
AIPERF_STATS = {"mean": "avg", "p50": "p50", "p90": "p90", "p99": "p99"}


def read_json(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError as err:
        raise ImportFailed(f"{path}: no such file") from err
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ImportFailed(f"{path} is not JSON: {err}") from err
    if not isinstance(data, dict):
        raise ImportFailed(f"{path} holds a JSON {type(data).__name__}, not the object a run's result is")
    return data


def kind_of(data: dict) -> str | None:
    if all(k in data for k in VLLM_KEYS):
        return "vllm-bench"
    if isinstance(data.get("time_to_first_token"), dict) and isinstance(data.get("request_throughput"), dict):
        return "aiperf"
    return None


def judged(row: dict, knobs: dict) -> dict:
    """servelab's own checks of the load (failed requests, prompts completed, the arrival rate)."""
    problems, warnings, columns = checks.load_checks(row, knobs, requested_rate(knobs.get("request_rate")))
    return {**columns, "valid": not problems, "invalid_reason": "; ".join(problems), "warnings": "; ".join(warnings)}


def vllm_bench_row(data: dict, path: Path) -> dict:
    if missing := [k for k in VLLM_KEYS if k not in data]:
        raise ImportFailed(f"{path} is not a `vllm bench serve --save-result` JSON: it lacks {missing}")
    row = bench_row(data)
    knobs = {"num_prompts": data.get("num_prompts"), "request_rate": data.get("request_rate")}
    if data.get("max_concurrency") is not None:
        knobs["max_concurrency"] = data["max_concurrency"]
    return {"model": data.get("model_id"), "request_rate": requested_rate(data.get("request_rate")),
            **({"max_concurrency": knobs["max_concurrency"]} if "max_concurrency" in knobs else {}),
            "num_prompts": data.get("num_prompts"), **row, "repeats": 1, **judged(row, knobs),
            "engine": data.get("backend"), "imported_tool": "vllm bench serve", "date": data.get("date")}


def aiperf_metric(data: dict, name: str, path: Path) -> dict | None:
    metric = data.get(name)
    if metric is None:
        return None
    if not isinstance(metric, dict) or "unit" not in metric:
        raise ImportFailed(f"{path}: AIPerf's {name} is not a statistic with a unit: {metric!r}")
    return metric


def aiperf_value(data: dict, name: str, path: Path, stat: str = "avg"):
    metric = aiperf_metric(data, name, path)
    return None if metric is None else metric.get(stat)


def aiperf_load(config: dict) -> dict:
    """The load AIPerf was given: 0.13's `phases` (the profiling phase's rate or concurrency),
    or the earlier `loadgen` section."""
    phases = config.get("phases") or []
    phase = next((p for p in phases if isinstance(p, dict) and p.get("name") == "profiling"),
                 phases[-1] if phases and isinstance(phases[-1], dict) else {})
    loadgen = config.get("loadgen") or {}
    rate = phase.get("rate", loadgen.get("request_rate"))
    concurrency = phase.get("concurrency", loadgen.get("concurrency"))
    count = phase.get("requests", loadgen.get("request_count"))
    return {k: v for k, v in {"request_rate": rate, "max_concurrency": concurrency, "num_prompts": count}.items()
            if v is not None}


def aiperf_model(config: dict) -> str | None:
    models = config.get("models")
    if isinstance(models, dict) and models.get("items"):
        return models["items"][0].get("name")
    names = (config.get("endpoint") or {}).get("model_names") or []
    return names[0] if names else None


def aiperf_row(data: dict, path: Path) -> dict:
    for name in ("time_to_first_token", "request_throughput"):
        if aiperf_metric(data, name, path) is None:
            raise ImportFailed(f"{path} is not AIPerf's profile_export_aiperf.json: it lacks {name}")
    row = {}
    for name, prefix in AIPERF_LATENCIES.items():
        if (metric := aiperf_metric(data, name, path)) is None:
            continue
        if metric["unit"] not in TO_MS:
            raise ImportFailed(f"{path}: AIPerf's {name} is in {metric['unit']!r}, not a unit of time")
        for stat, theirs in AIPERF_STATS.items():
            if metric.get(theirs) is not None:
                row[f"{prefix}_{stat}_ms"] = metric[theirs] * TO_MS[metric["unit"]]
    # the requests completed: request_count, else how many records the TTFT statistic counts (schema 1.1+)
    completed = aiperf_value(data, "request_count", path)
    if completed is None:
        completed = aiperf_value(data, "time_to_first_token", path, "count")
    if completed is None:
        raise ImportFailed(f"{path}: AIPerf's result says how many requests completed nowhere (no request_count, "
                           f"no count in time_to_first_token)")
    failed = aiperf_value(data, "error_request_count", path) or 0
    duration = aiperf_metric(data, "benchmark_duration", path)
    config = data.get("input_config") or {}
    load = aiperf_load(config)
    row.update({
        "completed": int(completed), "failed": int(failed), "prompts_sent": int(completed) + int(failed),
        "duration_s": duration["avg"] * TO_MS.get(duration["unit"], 1e3) / 1e3 if duration else None,
        "request_throughput_rps": aiperf_value(data, "request_throughput", path),
        "output_throughput_tps": aiperf_value(data, "output_token_throughput", path),
        "total_token_throughput_tps": aiperf_value(data, "total_token_throughput", path),
        "total_input_tokens": aiperf_value(data, "total_isl", path),
        "total_output_tokens": aiperf_value(data, "total_osl", path) or aiperf_value(data, "total_output_tokens", path),
    })
    knobs = {"num_prompts": load.get("num_prompts"), **load}
    return {"model": aiperf_model(config),   # no rate where AIPerf's file does not say the load
            "request_rate": requested_rate(load["request_rate"]) if "request_rate" in load else None,
            **({"max_concurrency": load["max_concurrency"]} if "max_concurrency" in load else {}),
            "num_prompts": load.get("num_prompts"), **row, "window": "whole run", "repeats": 1,
            **judged(row, knobs), "imported_tool": f"aiperf {data.get('aiperf_version') or ''}".strip(),
            "date": data.get("start_time")}


def import_file(path: str | Path, *, experiment: str, server_point: str) -> dict:
    """One foreign run's result as a table row (its kind told from its shape)."""
    path = Path(path)
    data = read_json(path)
    kind = kind_of(data)
    if kind is None:
        raise ImportFailed(f"{path} is neither a `vllm bench serve --save-result` JSON (keys {list(VLLM_KEYS)}) "
                           f"nor AIPerf's profile_export_aiperf.json (time_to_first_token and request_throughput "
                           f"as statistics); its keys: {sorted(data)[:12]}")
    row = vllm_bench_row(data, path) if kind == "vllm-bench" else aiperf_row(data, path)
    for lat in LATENCIES:   # every column a servelab row has, empty where the tool gives none
        for stat in STATS:
            row.setdefault(f"{lat}_{stat}_ms", None)
    return {"experiment": experiment, "server_point": server_point, **row, "imported_from": str(path),
            "point_key": f"imported:{path.name}"}
