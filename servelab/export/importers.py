"""Runs made by other tools as rows of servelab's table (the columns of results/EXP/metrics.csv
where they mean the same thing), so that they go on the same figure and into the comparisons.

    vllm bench serve --save-result        its saved JSON, plain or gzipped: the very file
                                          servelab's own points keep (store/KEY/bench.json.gz),
                                          read by servelab.analysis.metrics.bench_row
    AIPerf profile_export_aiperf.json      its aggregate statistics, each with its unit; the shape
                                          read from ai-dynamo/aiperf's JsonExportData
                                          (aiperf/common/models/export_models.py: 1.x at commit
                                          db4f6397d11ee2d4cfbb41f70b2327315163dcf0, schema 1.4 in
                                          the PyPI release 0.13.0; 0.10's without total_isl); a
                                          run whose every request failed is a row of 0 completed
    an llm-d benchmark report 0.2.1        YAML or JSON: servelab's own export, or llm-d's
                                          (servelab/export/llmd_import.py)

A file that is not one of these, or holds a string where a number belongs, is refused in one
line naming the file and what is wrong; nothing is written.
"""

from __future__ import annotations

from pathlib import Path

from servelab.analysis import checks
from servelab.analysis.metrics import LATENCIES, SCALARS, STATS, bench_row, requested_rate
from servelab.export import bounded_read, import_validity
from servelab.export.import_failed import ImportFailed


# a bench-serve result (`vllm bench serve --save-result`): what a row needs
BENCH_SERVE_KEYS = ("completed", "duration", "request_throughput", "output_throughput", "mean_ttft_ms", "p99_ttft_ms")
# AIPerf's statistics -> the table's latency prefixes. AIPerf's inter_token_latency is per request
# (request latency - TTFT) / (output tokens - 1): vLLM's TPOT; its inter_chunk_latency is the gaps
# between streamed chunks, pooled: vLLM's ITL.
AIPERF_LATENCIES = {"time_to_first_token": "ttft", "inter_token_latency": "tpot", "inter_chunk_latency": "itl",
                    "request_latency": "e2el"}
TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "sec": 1e3, "s": 1e3}
AIPERF_STATS = {"mean": "avg", "p50": "p50", "p90": "p90", "p99": "p99"}


def read_json(path: Path, max_bytes: int = bounded_read.MAX_BYTES) -> dict:
    """A result file's object: JSON, or YAML (llm-d writes its reports in YAML), read within
    bounds (servelab/export/bounded_read.py)."""
    return bounded_read.read_object(path, max_bytes)


def numbers(data: dict, keys, path: Path, what: str = "") -> None:
    """Every one of `keys` that `data` has is a number (or null)."""
    for key in keys:
        v = data.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise ImportFailed(f"{path}: {what}{key} is {v!r}, a {type(v).__name__} where a number belongs")


def kind_of(data: dict) -> str | None:
    if "version" in data and "run" in data and ("results" in data or "scenario" in data):
        return "llmd"
    if all(k in data for k in BENCH_SERVE_KEYS):
        return "vllm-bench"
    if isinstance(data.get("time_to_first_token"), dict) and isinstance(data.get("request_throughput"), dict):
        return "aiperf"
    if "aiperf_version" in data:
        return "aiperf"   # a run whose every request failed has no latency at all; else what it lacks is said
    if "completed" in data and sum(k in data for k in BENCH_SERVE_KEYS) >= 3:
        return "vllm-bench"   # what it lacks is said
    return None


def judged(row: dict, knobs: dict, exported: dict | None = None) -> dict:
    """servelab's own checks of the load (failed requests, prompts completed, the arrival rate)
    and of figures no run can produce (servelab/export/import_validity.py)."""
    problems, warnings, columns = checks.load_checks(row, knobs, requested_rate(knobs.get("request_rate")))
    return {**columns, **import_validity.verdict(row, problems, warnings, exported)}


def vllm_bench_row(data: dict, path: Path) -> dict:
    if missing := [k for k in BENCH_SERVE_KEYS if k not in data]:
        raise ImportFailed(f"{path} is not a `vllm bench serve --save-result` JSON: it lacks {missing}")
    numbers(data, [*SCALARS, "num_prompts", "max_concurrency",
                   *(f"{s}_{lat}_ms" for lat in LATENCIES for s in (*STATS, "median", "std"))], path)
    if data.get("request_rate") not in (None, "inf") and not isinstance(data["request_rate"], (int, float)):
        raise ImportFailed(f"{path}: request_rate is {data['request_rate']!r}, neither a number nor 'inf'")
    for key in ("completed", "failed"):
        if data.get(key) is not None and (data[key] < 0 or data[key] != int(data[key])):
            raise ImportFailed(f"{path}: {key} is {data[key]!r}, not a count of requests")
    row = bench_row(data)
    knobs = {"num_prompts": data.get("num_prompts"), "request_rate": data.get("request_rate")}
    if data.get("max_concurrency") is not None:
        knobs["max_concurrency"] = data["max_concurrency"]
    return {"model": data.get("model_id"), "request_rate": requested_rate(data.get("request_rate")),
            **({"max_concurrency": knobs["max_concurrency"]} if "max_concurrency" in knobs else {}),
            "num_prompts": data.get("num_prompts"), **row, "repeats": 1,
            **judged({**row, "num_prompts": data.get("num_prompts"), "imported_tool": "vllm bench serve"}, knobs),
            "engine": data.get("backend"), "imported_tool": "vllm bench serve", "date": data.get("date")}


def aiperf_metric(data: dict, name: str, path: Path) -> dict | None:
    metric = data.get(name)
    if metric is None:
        return None
    if not isinstance(metric, dict) or "unit" not in metric:
        raise ImportFailed(f"{path}: AIPerf's {name} is not a statistic with a unit: {metric!r}"[:300])
    numbers(metric, [k for k in metric if k != "unit"], path, f"AIPerf's {name}.")
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


def aiperf_errors(data: dict) -> str:
    """AIPerf's error_summary ([{error_details: {code, type, message}, count}]) in a line."""
    out = []
    for item in data.get("error_summary") or []:
        details = item.get("error_details") or {} if isinstance(item, dict) else {}
        what = details.get("type") or details.get("code") or "error"
        out.append(f"{item.get('count', '?')} x {what}: {str(details.get('message') or '')[:120]}")
    return "; ".join(out)


def aiperf_failed_row(data: dict, path: Path) -> dict:
    """A run none of whose requests completed: a row of 0 completed, invalid, with AIPerf's reasons."""
    failed = aiperf_value(data, "error_request_count", path) or 0
    load = aiperf_load(data.get("input_config") or {})
    reason = f"AIPerf: 0 of {int(failed)} requests completed" + (f" ({e})" if (e := aiperf_errors(data)) else "")
    return {"model": aiperf_model(data.get("input_config") or {}),
            "request_rate": requested_rate(load["request_rate"]) if "request_rate" in load else None,
            **({"max_concurrency": load["max_concurrency"]} if "max_concurrency" in load else {}),
            "num_prompts": load.get("num_prompts"), "completed": 0, "failed": int(failed),
            "prompts_sent": int(failed), "window": "whole run", "repeats": 1, "valid": False, "import_valid": False,
            "invalid_reason": reason, "warnings": "",
            "imported_tool": f"aiperf {data.get('aiperf_version') or ''}".strip(), "date": data.get("start_time")}


def aiperf_input_tokens(data: dict, path: Path):
    """The prompts' tokens: total_isl, else (0.10) the input_sequence_length statistic's sum,
    else its mean times its count."""
    if (total := aiperf_value(data, "total_isl", path)) is not None:
        return total
    isl = aiperf_metric(data, "input_sequence_length", path) or {}
    if isl.get("sum") is not None:
        return isl["sum"]
    return isl["avg"] * isl["count"] if isl.get("avg") is not None and isl.get("count") is not None else None


def aiperf_row(data: dict, path: Path) -> dict:
    if aiperf_metric(data, "time_to_first_token", path) is None and \
            aiperf_metric(data, "error_request_count", path) is not None:
        return aiperf_failed_row(data, path)
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
        "total_input_tokens": aiperf_input_tokens(data, path),
        "total_output_tokens": aiperf_value(data, "total_osl", path) or aiperf_value(data, "total_output_tokens", path),
    })
    knobs = {"num_prompts": load.get("num_prompts"), **load}
    return {"model": aiperf_model(config),   # no rate where AIPerf's file does not say the load
            "request_rate": requested_rate(load["request_rate"]) if "request_rate" in load else None,
            **({"max_concurrency": load["max_concurrency"]} if "max_concurrency" in load else {}),
            "num_prompts": load.get("num_prompts"), **row, "window": "whole run", "repeats": 1,
            **judged(row, knobs), "imported_tool": f"aiperf {data.get('aiperf_version') or ''}".strip(),
            "date": data.get("start_time")}


def import_file(path: str | Path, *, experiment: str = "imported", server_point: str | None = None,
                max_bytes: int = bounded_read.MAX_BYTES) -> dict:
    """One foreign run's result as a table row (its kind told from its shape). The row keeps
    the identity the file carries (servelab's own export: experiment, configuration, point
    key, load knobs) under `identity`; `experiment` and `server_point` name it otherwise."""
    path = Path(path)
    data = read_json(path, max_bytes)
    kind = kind_of(data)
    if kind is None:
        raise ImportFailed(f"{path} is neither a `vllm bench serve --save-result` JSON (keys {list(BENCH_SERVE_KEYS)}), "
                           f"AIPerf's profile_export_aiperf.json (time_to_first_token and request_throughput "
                           f"as statistics) nor an llm-d benchmark report; its keys: {sorted(map(str, data))[:12]}")
    try:
        if kind == "llmd":
            from servelab.export import llmd_import
            row = llmd_import.row(data, path)
        else:
            row = vllm_bench_row(data, path) if kind == "vllm-bench" else aiperf_row(data, path)
    except ImportFailed:
        raise
    except (KeyError, TypeError, AttributeError, IndexError, ValueError, ArithmeticError) as err:
        # a shape none of the checks foresaw
        raise ImportFailed(f"{path}: a {kind} result of an unexpected shape ({type(err).__name__}: {err})"[:400]) \
            from err
    import_validity.check_finite(row, path)
    for lat in LATENCIES:   # every column a servelab row has, empty where the tool gives none
        for stat in STATS:
            row.setdefault(f"{lat}_{stat}_ms", None)
    identity = row.pop("identity", None) or {}
    return {"experiment": experiment, "server_point": server_point or "imported", **row, "imported_from": str(path),
            "point_key": f"imported:{path.name}", "identity": identity}
