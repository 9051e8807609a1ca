"""What makes a measured point trustworthy, or not: checks that invalidate it (the client
did not deliver the load, requests failed, a latency below the hardware's floor) and
checks that warn (the server saturated under a concurrency cap, TTFT rising within the
point, the session drifting, load from outside the session, TTFT far above the prefill
floor at low load). Problems go to `invalid_reason`, warnings to `warnings`.
"""

from __future__ import annotations

import math
import numbers

from servelab.analysis.roofline import floors_ms
from servelab.config.experiments import gpus_needed
from servelab.config import engine_facts as facts
# the TTFT trend (a queue that grew) is also what a search's judge refuses a load on
from servelab.search.slo import TTFT_TREND_LIMIT, burst, ttft_trend  # noqa: F401  (a row's ttft_trend: metrics)

# a point whose client fell this far behind its requested arrival rate is flagged
RATE_TOLERANCE = 0.8
# |relative change| of the session's first point, measured again at its end, per metric
# (TTFT p50 over a few dozen requests moves more by chance than ITL or throughput)
DRIFT_LIMITS = {"p50_ttft_ms": 0.25, "p50_itl_ms": 0.10, "output_throughput": 0.10}
# Load from outside the session during a point, warned only where it biases the point
# (measured: docs/measurement-conditions.md, tests/benchmarks/outside_load_calibration.py).
# On the CPU the engine computes on every core: a quarter of a core taken from it moves the
# point (a second clone beside the default: ITL +19 %), so more than that is warned.
OUTSIDE_CPU_LIMIT = 0.25
# On a GPU the session keeps about one core busy and the rest of the machine is idle: half
# the cores busy moved nothing beyond run-to-run noise, nine tenths (sharing the session's
# physical cores) moved TTFT and ITL (4x H100: docs/measurements.md). Warned, on the safe side
# of that bracket, once the outside's load and the session's together keep more than this
# share of the machine's cores busy.
GPU_BUSY_SHARE_MAX = 0.6
# An engine's own benchmark client is one Python process: this busy, it paces the load itself
# (its event loop, not the server, decides when requests go and when tokens are read)
CLIENT_BUSY_LIMIT = 0.9


def load_checks(row: dict, knobs: dict, requested: float) -> tuple[list[str], list[str], dict]:
    """Did the client deliver the load, and if not, was it the server saturating?
    Under a concurrency cap that the client reached, a rate below the requested one is
    the measurement (the server served what it could), not a broken client."""
    problems, warnings, columns = [], [], {"saturated": False}
    if row.get("failed"):
        problems.append(f"{row['failed']} failed requests")
    if row.get("requests_cut") and not row.get("completed"):   # a point sized in time measured nothing
        problems.append(f"none of its {row.get('prompts_sent')} requests completed: all were still in flight "
                        f"{row.get('grace_s')} s after its duration and were cut (a longer grace_s measures it)")
    num_prompts = knobs.get("num_prompts")
    if num_prompts is not None and row.get("completed") != num_prompts:
        problems.append(f"completed {row.get('completed')} of {num_prompts}")
    achieved = row.get("achieved_rate_rps")
    if math.isfinite(requested) and achieved is not None and achieved < RATE_TOLERANCE * requested:
        cap, peak = knobs.get("max_concurrency"), row.get("max_concurrent_requests")
        if cap and peak is not None and peak >= cap:
            columns["saturated"] = True
            warnings.append(f"saturated: at max_concurrency {cap} the server took {achieved:.2f} req/s "
                            f"of the requested {requested:g}/s")
        else:
            problems.append(f"arrival rate {achieved:.2f}/s below requested {requested:g}/s")
    trend = columns["ttft_trend"] = row.get("ttft_trend")
    if (why := burst(requested, *arrivals(row), row.get("e2el_p50_ms"))):
        warnings.append(why)
    elif "steady_note" in row:   # the held window decides (servelab.search.steady_window)
        if row["steady_note"] and (math.isfinite(requested) or knobs.get("max_concurrency")):
            warnings.append(f"no steady state: {row['steady_note']}")
    elif trend is not None and trend > TTFT_TREND_LIMIT:   # no per-request send times
        warnings.append(f"TTFT rose x{trend:.1f} from the first to the last third of the requests (no steady state)")
    return problems, warnings, columns


def arrivals(row: dict) -> tuple[int, float | None]:
    """A row's requests and the seconds their arrivals spanned (from the client's own send
    times, achieved_rate_rps; where it saves none, as SGLang's, its schedule's span at the
    rate asked), None where unknown."""
    def known(name):   # None and NaN (a table's empty cell) alike
        value = row.get(name)
        return value if isinstance(value, numbers.Real) and not math.isnan(value) else None

    n = int(known("completed") or 0) + int(known("failed") or 0)
    rate = known("achieved_rate_rps")
    if rate is None:   # no send times saved: the schedule's rate
        rate = known("request_rate")
    return n, ((n - 1) / rate if rate and math.isfinite(rate) and n > 1 else None)


def floor_checks(row: dict, record: dict) -> tuple[list[str], dict]:
    """ITL p50 below the decode floor is impossible (a measurement error): invalid.
    The TTFT floor is returned for the table-level check at the lowest load."""
    server = record["identity"]["server"]
    gpus = record["identity"]["hardware"].get("gpus") or []
    data_parallel = next((int(server[k]) for k in ("data_parallel_size", "dp", "dp_size") if server.get(k)), 1)
    completed = row.get("completed") or 0
    input_tokens = row.get("total_input_tokens") / completed if completed and row.get("total_input_tokens") else None
    size = record.get("model_size") or {}
    if row.get("weights_gib"):   # what the engine loaded on each GPU (quantized weights included)
        model, per_gpu = {"weight_bytes": row["weights_gib"] * 2 ** 30, "dtype": None,
                          "active_fraction": size.get("active_fraction", 1.0)}, 1
    else:                        # the checkpoint's size, spread over the point's tensor/pipeline GPUs
        model, per_gpu = size, gpus_needed(server) // data_parallel
    floors = floors_ms(model, gpus, per_gpu, input_tokens)
    problems = []
    itl, floor = row.get("itl_p50_ms"), floors["itl_floor_ms"]
    if itl is not None and floor is not None and 0 < itl < floor:
        problems.append(f"ITL p50 {itl:.2f} ms below the hardware's decode floor {floor:.2f} ms (roofline): "
                        f"a measurement error")
    return problems, floors


def condition_warnings(row: dict) -> list[str]:
    """Warnings from how the point was measured: drift over its session, load from outside."""
    warnings = []
    # a drift inside the range the first point's own repeats spanned is chance, not the session
    within = str(row.get("drift_within_repeats") or "").split()
    for metric, limit in DRIFT_LIMITS.items():
        drift = row.get(f"drift_{metric}_pct")
        if drift is not None and abs(drift) > 100 * limit and metric not in within:
            warnings.append(f"the session drifted: its first point measured again moved {metric} {drift:+.0f} %")
    if note := outside_load_warning(row):
        warnings.append(note)
    client = row.get("client_cpu_cores")
    if client is not None and client >= CLIENT_BUSY_LIMIT and facts.client(row.get("client")).one_process:
        warnings.append(f"the benchmark client kept {client:.2f} of a core busy: a single-process client "
                        f"this busy may pace the load (its figures may be the client's, not the engine's)")
    if str(row.get("kv_transport") or "").startswith("mooncake over TCP"):
        warnings.append(f"the KV cache moved {row['kv_transport']}: mooncake found no RDMA device, "
                        f"so TTFT carries a TCP copy of each prompt's KV")
    if row.get("outside_gpu_processes"):
        warnings.append(f"{row['outside_gpu_processes']} other process(es) on the point's GPUs")
    return warnings


# the client's ITL p50 this far below the engine's own busy step: the tokens did not reach it
# one a step, but in bursts (a client or an API server that fell behind, several tokens read
# at once); its ITL then measures the stream's bunching, not the engine
ITL_BELOW_STEP = 0.1


def itl_against_record(row: dict) -> dict:
    """Where the client's ITL p50 sits far below what the engine's record allows (its step
    time while busy, servelab.analysis.bound), say so: `itl_contradicts_record` true and a
    warning; comparisons draw no verdict on ITL then. Speculative decoding emits several
    tokens a step: not judged."""
    itl, step = row.get("itl_p50_ms"), row.get("step_ms")
    idle = row.get("idle_fraction")
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (itl, step)) or step <= 0 \
            or row.get("speculative_config") or row.get("num_speculative_tokens"):
        return row
    busy = step * (1 - idle) if isinstance(idle, (int, float)) and math.isfinite(idle) else step
    if itl >= ITL_BELOW_STEP * busy:
        return row
    note = (f"ITL p50 {itl:.3g} ms is under a tenth of the engine's own step ({busy:.3g} ms while busy): the "
            f"tokens reached the client in bursts, so its ITL is the stream's bunching, not the engine's pace "
            f"(no verdict on ITL)")
    return {**row, "itl_contradicts_record": True,
            "warnings": "; ".join(w for w in (row.get("warnings"), note) if w)}


def outside_load_warning(row: dict) -> str | None:
    """Load from outside the session where it biases the point: any of the CPU engine's
    cores taken (CPU rows), or the machine's cores run short (GPU rows)."""
    outside, cores = row.get("outside_cpu_cores"), row.get("machine_cores")
    if outside is None:
        return None
    if row.get("device") != "gpu" or not cores:   # a CPU engine
        if outside > OUTSIDE_CPU_LIMIT:
            return f"processes outside the session used {outside:.2f} CPU cores during the point"
        return None
    ours = row.get("session_cpu_cores")
    ours = 0.0 if ours is None or ours != ours else ours   # rows from before it was recorded: unknown
    busy = (outside + ours) / cores
    if busy > GPU_BUSY_SHARE_MAX:
        return (f"the CPU ran short: processes outside the session used {outside:.2f} and the session "
                f"{ours:.2f} of {cores} cores ({busy:.0%} busy) during the point")
    return None


def low_load_ttft_warnings(df, factor: float):
    """TTFT p50 at the lowest load of each server point (and workload) far above the prefill
    floor: the engine is slower than its hardware allows, or the point absorbed a start-up."""
    needed = ("ttft_floor_ms", "ttft_p50_ms", "request_rate")
    if any(c not in df.columns for c in needed) or df["ttft_floor_ms"].isna().all():
        return df
    keys = [c for c in ("server_point", "workload") if c in df.columns]
    df = df.copy()
    for _, group in df.groupby(keys, dropna=False):
        lowest = group[group["request_rate"] == group["request_rate"].min()]
        capped = "max_concurrency" in group.columns and (lowest["max_concurrency"] == 1).all()
        if not (lowest["request_rate"] < float("inf")).all() and not capped:
            continue   # a burst (rate inf) queues by design: no low-load point to judge
        if group["request_rate"].nunique() < 2 and not capped:
            continue   # one load for all (week 16 varies the prompt): no lowest load to judge
        for index, row in lowest.iterrows():
            if row["ttft_floor_ms"] and row["ttft_p50_ms"] > factor * row["ttft_floor_ms"]:
                note = (f"TTFT p50 {row['ttft_p50_ms']:.0f} ms at the lowest load is over {factor:g}x the "
                        f"prefill floor {row['ttft_floor_ms']:.1f} ms")
                df.at[index, "warnings"] = "; ".join(w for w in (row.get("warnings"), note) if w)
    return df
