"""Import's own verdict on an imported row: figures no run can produce make it invalid,
whatever the file says of itself.

A file may say it is valid (servelab's own export carries `servelab_point.valid`); that word
is kept as `exported_valid`, beside `import_valid` (these checks and servelab's load checks),
and `valid` is both: an exporter can mark a row invalid, never make an impossible one valid.

    finite        every figure a finite number (a figure that overflows in conversion,
                  such as 1e308 s in ms, is refused in one line: it cannot be a cell)
    not negative  counts, durations, latencies, throughputs
    counts        completed + failed at most what was sent
    percentiles   p50 <= p90 <= p99 of each latency, to a microsecond and 0.1 % (rounding)
    rates         a rate agrees with its count over its duration: within 2 % and the duration's
                  rounding where the row is one run of vLLM's or SGLang's client over its
                  whole duration (their rate is that quotient); within RATE_SLACK where it is the
                  mean of repeats or a held window's (those differ from count / duration by
                  up to 15 % in servelab's recorded runs, tests/data/recorded_gpu)
"""

from __future__ import annotations

import math

from servelab.analysis.columns import LATENCIES
from servelab.export.import_failed import ImportFailed

COUNTS = ("completed", "failed", "prompts_sent", "num_prompts", "total_input_tokens", "total_output_tokens")
DURATIONS = ("duration_s",)
THROUGHPUTS = {"request_throughput_rps": "completed", "output_throughput_tps": "total_output_tokens"}
ORDERED = ("p50", "p90", "p99")
# a rate of one run over its whole duration, from a client whose rate is its count over its
# duration (vLLM's and SGLang's benchmark clients): to the duration's rounding (an llm-d
# report's ISO duration in ms: +-0.5 ms) and a relative 2 %
RATE_REL = 0.02
EXACT_RATE_TOOLS = ("vllm bench serve", "vllm-benchmark", "sglang-bench-serving")
DURATION_ROUNDING_S = 5e-4
# a repeated point's mean of rates, or a held window's, against the totals over the whole duration
RATE_SLACK = 2.0
# columns where infinity is a value (unbounded), not an overflow
UNBOUNDED = ("request_rate", "max_concurrency")


def figure_columns(row: dict) -> list[str]:
    return [c for c, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
            and c not in UNBOUNDED]


def check_finite(row: dict, path) -> None:
    """Refuse a figure that is not a finite number (one that overflowed converting units)."""
    for column in figure_columns(row):
        if not math.isfinite(row[column]):
            raise ImportFailed(f"{path}: its {column} comes out as {row[column]!r}, not a finite number "
                               f"(a figure too large for its unit)")


def negative(row: dict) -> list[str]:
    latency = [c for c in row if c.endswith("_ms") or (c.startswith("latency_") and c.endswith("_s"))]
    columns = [*COUNTS, *DURATIONS, *THROUGHPUTS, "total_token_throughput_tps", *latency]
    return [f"{c} is negative ({row[c]:g})" for c in columns if isinstance(row.get(c), (int, float))
            and not isinstance(row.get(c), bool) and row[c] < 0]


def counts(row: dict) -> list[str]:
    completed, failed = row.get("completed"), row.get("failed") or 0
    sent = row.get("prompts_sent")
    if sent is None and (row.get("repeats") or 1) == 1:
        sent = row.get("num_prompts")
    if completed is None or sent is None or not isinstance(sent, (int, float)):
        return []
    if completed + failed > sent:
        return [f"completed {completed:g} and failed {failed:g} exceed the {sent:g} requests sent"]
    return []


def percentiles(row: dict) -> list[str]:
    out = []
    for lat in (*LATENCIES, "latency"):
        unit = "s" if lat == "latency" else "ms"
        found = [(s, row.get(f"{lat}_{s}_{unit}")) for s in ORDERED]
        found = [(s, v) for s, v in found if isinstance(v, (int, float)) and math.isfinite(v)]
        for (lo, a), (hi, b) in zip(found, found[1:]):   # to a microsecond (llmd_import.MICROSECOND)
            if a > b + (1e-3 if unit == "ms" else 1e-6) + 1e-3 * abs(b):
                out.append(f"{lat} {lo} ({a:g} {unit}) above its {hi} ({b:g} {unit})")
    return out


def rates(row: dict) -> list[str]:
    duration = row.get("duration_s")
    if not isinstance(duration, (int, float)) or duration < 0:
        return []
    # AIPerf's rate spans its requests, its duration the whole run (0.2-0.8 % apart in the CPU
    # default on a quiet host, more beside other work): held to the slack, as other tools are
    exact = str(row.get("imported_tool") or "").startswith(EXACT_RATE_TOOLS)
    one_run = exact and (row.get("repeats") or 1) == 1 and row.get("window") in (None, "", "whole run")
    out = []
    for rate_col, count_col in THROUGHPUTS.items():
        rate, count = row.get(rate_col), row.get(count_col)
        if not isinstance(rate, (int, float)) or rate <= 0:
            continue
        if duration == 0:
            out.append(f"{rate_col} {rate:g} over a duration of 0 s")
            continue
        if not isinstance(count, (int, float)) or count < 0:
            continue
        expected = count / duration
        if one_run:   # the rate's own rounding and the duration's, both ways
            tolerance = RATE_REL + DURATION_ROUNDING_S / duration
            agrees = abs(rate - expected) <= tolerance * max(rate, expected)
        else:
            agrees = expected / RATE_SLACK <= rate <= expected * RATE_SLACK
        if not agrees:
            out.append(f"{rate_col} {rate:g} disagrees with {count_col} {count:g} over {duration:g} s "
                       f"({expected:g})")
    return out


def impossible(row: dict) -> list[str]:
    """Every way the row's figures cannot all be true (none: they can)."""
    return [*negative(row), *counts(row), *percentiles(row), *rates(row)]


def verdict(row: dict, problems: list[str], warnings: list[str], exported: dict | None = None) -> dict:
    """The row's validity columns: import's own (`problems` from the load checks, and the
    impossible figures), the exporter's word where the file has one, and `valid`, both."""
    own = [*(f"impossible: {p}" for p in impossible(row)), *problems]
    out = {"import_valid": not own, "valid": not own, "warnings": "; ".join(warnings)}
    if exported is not None and "valid" in exported:
        said = bool(exported["valid"])
        out["exported_valid"] = said
        if not said:
            own.append(f"as exported: {exported.get('invalid_reason') or 'invalid'}")
            out["valid"] = False
        if exported.get("warnings") and exported["warnings"] not in warnings:
            out["warnings"] = "; ".join([*warnings, str(exported["warnings"])])
    out["invalid_reason"] = "; ".join(own)
    return out
