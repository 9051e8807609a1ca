"""Why a point's repeats differ: the recorded signal that moved with its throughput across
repeats (Spearman's rank correlation, with each repeat's values), or that none did.

With 3 repeats a rank correlation is 1 by chance one time in 6 (3! orders), so a signal is
named only where |rho| >= 0.8 over at least 4 repeats, or it is 1 over 3 with the note that
3 cannot tell; a signal whose repeats stayed within 2 % of its mean did not move, whatever
its ranks; the repeats' values are always given so that a reader can judge.
"""

from __future__ import annotations

import math

METRIC = "output_throughput_tps"
# what a repeat records of its conditions (servelab.analysis.bound's columns, the client's CPU,
# the load from outside), by the name a reader knows
SIGNALS = {"cpu_engine_core_cores": "engine core CPU", "cpu_engine_core_top_cores": "engine core CPU (process)",
           "cpu_api_server_cores": "API server CPU", "cpu_api_server_top_cores": "API server CPU (busiest)",
           "cpu_worker_cores": "worker CPU", "client_cpu_cores": "client CPU",
           "outside_cpu_cores": "CPU outside the session", "running_mean": "requests running",
           "waiting_mean": "requests waiting", "kv_usage_mean": "KV usage", "step_ms": "step time",
           "step_tokens_mean": "tokens a step", "step_read_mb": "MB read a step",
           "gpu_sm_util_pct": "SM utilization", "gpu_sm_clock_mhz": "SM clock", "gpu_power_w": "GPU power",
           "gpu_mem_util_pct": "memory utilization", "preemptions": "preemptions",
           "wait_engine_core_share": "engine core waiting for a CPU", "wait_api_server_share":
           "API server waiting for a CPU", "host_busy_cores": "the machine's busy cores",
           "host_steal_cores": "CPU stolen by the hypervisor"}
STRONG = 0.8
# a signal that stayed within this share of its mean did not move, whatever its ranks say
# (an SM clock at 1975-1979 MHz)
STILL = 0.02


def ranks(values: list[float]) -> list[float]:
    """Ranks from 1, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(x: list[float], y: list[float]) -> float | None:
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    if sx == 0 or sy == 0:
        return None
    return sum((a - mx) * (b - my) for a, b in zip(rx, ry)) / (sx * sy)


def value(row: dict, column: str) -> float | None:
    v = row.get(column)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def explain(rows: list[dict], metric: str = METRIC) -> dict:
    """`spread_pct` (the repeats' range over their mean) and `spread_signal` of a point's repeats."""
    ys = [value(r, metric) for r in rows]
    if len(rows) < 3 or any(y is None for y in ys) or not sum(ys):
        return {}
    spread = 100 * (max(ys) - min(ys)) / (sum(ys) / len(ys))
    found, flat = [], []
    for column, name in SIGNALS.items():
        xs = [value(r, column) for r in rows]
        if any(x is None for x in xs):
            continue
        centre = sum(abs(x) for x in xs) / len(xs)
        if (rho := spearman(xs, ys)) is None or (max(xs) - min(xs)) <= STILL * centre:
            flat.append(name)
            continue
        found.append((abs(rho), rho, column, name, xs))
    if not found:
        text = (f"no recorded signal moved with it ({', '.join(flat)}: within 2 % of their means)" if flat
                else "no signal recorded in every repeat")
        return {"spread_pct": round(spread, 2), "spread_signal": text}
    found.sort(key=lambda f: -f[0])
    strength, rho, _column, name, xs = found[0]
    values = ", ".join(f"{x:.4g}" for x in xs)
    metric_values = ", ".join(f"{y:.5g}" for y in ys)
    if strength >= STRONG and (len(rows) >= 4 or strength > 0.999):
        note = " (3 repeats cannot tell chance from cause)" if len(rows) < 4 else ""
        text = f"{name} moved with it: rho {rho:+.2f} over {len(rows)} repeats ({name} {values}; {metric} " \
               f"{metric_values}){note}"
    else:
        text = f"no recorded signal moved with it (closest: {name}, rho {rho:+.2f}: {values}; {metric} " \
               f"{metric_values})"
    return {"spread_pct": round(spread, 2), "spread_signal": text}
