"""The metric columns of a servelab table (results/EXP/metrics.csv), in one place: the
checks (a figure may name only these and the experiment's knobs), the export and the docs
(config/README.md, checked by tests/analysis/test_columns.py) read them from here.

Each group names the module that fills it. A column measured over repeats also has its
`_ci95` (servelab.analysis.repeats); a knob of the point is a column of its own name.
"""

from __future__ import annotations

from servelab.analysis.paired import METRICS as PAIRED_METRICS
from servelab.engines.server_log import STARTUP_COLUMNS

# the client's latency statistics: LAT_STAT_ms, e.g. ttft_p99_ms (servelab.analysis.metrics)
LATENCIES = ("ttft", "tpot", "itl", "e2el")
STATS = ("mean", "p50", "p90", "p99")
# the client's result key -> its column
SCALARS = {
    "completed": "completed",
    "failed": "failed",
    "duration": "duration_s",
    "request_throughput": "request_throughput_rps",
    "output_throughput": "output_throughput_tps",
    "total_token_throughput": "total_token_throughput_tps",
    "total_input_tokens": "total_input_tokens",
    "total_output_tokens": "total_output_tokens",
    "max_concurrent_requests": "max_concurrent_requests",
}
MEASURED_SCALARS = set(SCALARS.values())
LATENCY_COLUMNS = {f"{lat}_{stat}_ms" for lat in LATENCIES for stat in STATS}
# the same over the window where the load held (servelab.search.steady_window)
STEADY_COLUMNS = {f"steady_{c}" for c in LATENCY_COLUMNS | {"output_throughput_tps", "request_throughput_rps",
                                                            "total_token_throughput_tps", "requests", "window_s"}}
# what each point records of how it was measured (servelab.analysis.metrics: conditions_columns,
# checks); the engine's counters are absent where it exports none (SGLang, a vLLM without speculation)
COUNTER_COLUMNS = {"prefix_cache_hit_rate", "spec_acceptance_rate", "spec_mean_accepted_len", "preemptions",
                   "peak_kv_cache_usage", "kv_transfers", "kv_transfer_mean_ms", "kv_transfer_p90_ms",
                   "kv_transfer_mb", "kv_failed_transfers"}
CONDITION_COLUMNS = COUNTER_COLUMNS | {"repeats", "warmup_prompts", "prefix_cache_reset", "outside_cpu_cores",
                                       "machine_cores", "session_cpu_cores", "client_cpu_cores",
                                       "outside_gpu_processes", "drift_max_pct", "ttft_trend", "saturated",
                                       "itl_floor_ms", "ttft_floor_ms", *STARTUP_COLUMNS, "startup_other_s"}
# the point itself, its server's facts and its engine's memory (servelab.analysis.metrics)
POINT_COLUMNS = {"request_rate", "achieved_rate_rps", "server_startup_s", "samples_ttft", "samples_itl", "valid",
                 "experiment", "server_point", "model", "kv_cache_tokens", "kv_cache_blocks", "max_concurrency_x",
                 "weights_gib", "peak_rss_gib", "peak_gpu_mem_gib"}
# an offline benchmark's (vllm bench latency; HF static batching) and the roofline's
# (servelab.analysis.roofline) columns
OFFLINE_COLUMNS = {"latency_mean_s", "latency_p50_s", "latency_p90_s", "latency_p99_s", "padding_fraction",
                   "total_tokens", "theory_latency_s", "theory_decode_step_ms"}
# the point's record of conditions over its active window (servelab.analysis.bound), by role
RECORD_ROLES = ("engine_core", "worker", "api_server", "client")
RECORD_COLUMNS = ({f"cpu_{r}_cores" for r in RECORD_ROLES} | {f"cpu_{r}_top_cores" for r in RECORD_ROLES}
                  | {f"wait_{r}_share" for r in RECORD_ROLES}
                  | {"running_mean", "running_max", "waiting_mean", "waiting_max", "kv_usage_mean", "kv_usage_max",
                     "idle_fraction", "step_ms", "step_tokens_mean", "step_read_mb", "record_window_s",
                     "record_ticks", "record_samples", "record_preemptions", "host_busy_cores", "host_steal_cores",
                     "gpu_sm_util_pct", "gpu_mem_util_pct", "gpu_sm_clock_mhz", "gpu_power_w"})

# a point sized in time (servelab.engines.clients.time_bound): how long it sent, how its requests ended
BOUNDED_COLUMNS = {"send_s", "drain_s", "point_wall_s", "prompts_sent", "requests_in_time", "requests_in_grace",
                   "requests_cut"}
# where the load held (servelab.search.steady_window) and which window a row's figures are from
WINDOW_COLUMNS = {"steady_note", "steady_ttft_trend", "steady_window_start_s", "steady_window_end_s", "window"}
# the session's first point measured again at its end (servelab.serve.measurement.drift_of)
DRIFT_COLUMNS = {"drift_p50_ttft_ms_pct", "drift_p50_itl_ms_pct", "drift_output_throughput_pct",
                 "drift_max_pct", "drift_within_repeats"}
# what limited the point and what moved with its repeats (servelab.analysis.bound, .spread)
WHY_COLUMNS = {"bound", "bound_evidence", "gpu_throttle", "spread_pct", "spread_signal"}
# where each figure comes from and whether to trust it (servelab.analysis.metrics, .checks)
PROVENANCE_COLUMNS = {"engine_version", "hardware", "cpu_features", "device", "serve_command", "bench_args",
                      "raw_json", "record_json", "session", "point_key", "warnings", "warned_repeats",
                      "invalid_reason", "eval_invalid_reason", "kv_transport", "plan_kv_cache_tokens",
                      "plan_weights_gib"}

# a point measured in interleaved rounds (servelab.serve.rounds): its design, each round's order,
# the CPU the other configurations' idle servers took during it, and each paired metric round by round (servelab.analysis.paired, comparisons); a client ITL
# the engine's step contradicts (servelab.analysis.checks.itl_against_record)
ROUNDS_COLUMNS = {"design", "rounds", "round_seed", "round_order", "itl_contradicts_record", "cpu_idle_servers_cores",
                  *(f"{m}_by_round" for m in PAIRED_METRICS)}

GROUPS = {
    "the client's latencies (`LAT_STAT_ms`)": LATENCY_COLUMNS,
    "the client's totals and rates": MEASURED_SCALARS,
    "over the held window": STEADY_COLUMNS,
    "a point sized in time": BOUNDED_COLUMNS,
    "the held window itself": WINDOW_COLUMNS,
    "how the point was measured: the engine's counters, the machine, start-up phases": CONDITION_COLUMNS,
    "the point and its server's facts": POINT_COLUMNS,
    "offline benchmarks and the roofline": OFFLINE_COLUMNS,
    "the record of conditions (docs/point-record.md)": RECORD_COLUMNS,
    "what bound it, what moved with its spread": WHY_COLUMNS,
    "the drift check": DRIFT_COLUMNS,
    "interleaved rounds and paired comparisons (docs/comparisons.md)": ROUNDS_COLUMNS,
    "provenance and validity": PROVENANCE_COLUMNS,
}
METRIC_COLUMNS = set().union(*GROUPS.values())
# what a column means where its name does not say it (docs/columns.md lists them under their group)
NOTES = {
    "max_concurrent_requests": "vLLM's client's count of requests active in one 1 s bucket of the run: it can "
                               "exceed `max_concurrency` (28 and 33 at 8 in flight), since requests that end "
                               "and start within the same second are both counted",
    "duration_s": "the client's whole run, first request sent to last answer, ramps included",
    "output_throughput_tps": "output tokens over `duration_s`, ramps included; `steady_output_throughput_tps` is "
                             "the held window's",
    "steady_output_throughput_tps": "over the window where the load held (servelab.search.steady_window); "
                                    "comparisons read it where every repeat held its load",
    "prompts_sent": "what the client sent: a point sized in time (`client.duration_s`) sends as many as hold its "
                    "load that long, so the `num_prompts` knob beside it is only its floor",
    "requests_cut": "requests still in flight after the grace (`grace_s`), cut: not in the figures",
    "window": "`steady` where a held window was found, else `whole run`",
    "repeats": "the repeats (or rounds) the mean and its `_ci95` are over",
    "bound": "what limited the point (KV capacity, the engine core's CPU, the API server's CPU, the GPU, ...), "
             "from its record of conditions; `bound_evidence` says what showed it",
    "valid": "false: a failed point kept as data, the engine's reason in `failure`",
    "design": "`interleaved rounds (seed S)` or sequential: how the point's repeats were ordered",
    "cpu_idle_servers_cores": "in rounds, the CPU the other configurations' idle servers took over the point",
    "itl_contradicts_record": "true where the client's ITL p50 is under a tenth of the engine's own busy step: no "
                              "ITL verdict is drawn",
}


def reference() -> str:
    """docs/columns.md: every metric column by group (`python -m servelab.analysis.columns`)."""
    lines = ["# The columns of a metrics table", "",
             "Generated from `servelab/analysis/columns.py` (`python -m servelab.analysis.columns > docs/columns.md`;",
             "a test keeps it current). Beside these: each knob of a point (a column of its own name;",
             "a client knob that shares a metric's name as `client.NAME`), `COLUMN_ci95` (the 95 % interval",
             "over a point's repeats), lm-eval's `TASK_METRIC_FILTER`. What they mean:",
             "[config/README.md](../config/README.md).", ""]
    for title, columns in GROUPS.items():
        lines += [f"## {title[0].upper() + title[1:]}", ", ".join(f"`{c}`" for c in sorted(columns)), ""]
        notes = [f"- `{c}`: {NOTES[c]}" for c in sorted(columns) if c in NOTES]
        lines += [*notes, ""] if notes else []
    return "\n".join(lines)


if __name__ == "__main__":
    print(reference(), end="")
