"""An llm-d benchmark report (0.2.1: servelab's own export, or one llm-d-benchmark wrote) as a
row of servelab's table: the inverse of servelab/export/llmd.py, so that export then import
gives the report's figures back (tests/llmd_roundtrip.py).

The report is checked against the schema first (servelab/export/llmd_schema.py, which takes
what llm-d's models take, numeric strings included). Its latencies land in the table's
columns in ms, whatever the report's units; the requests completed are its total less its
failures and those left incomplete. A report measured nothing where it has no
request_performance (a failed point): a row of 0 completed, never valid; servelab's offline
latency batch (`servelab_point.batch_latency_s`) is a row of its batch's latency figures.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from servelab.analysis import checks
from servelab.analysis.metrics import requested_rate
from servelab.export import import_validity, llmd_schema
from servelab.export.import_failed import ImportFailed

LATENCY = {"time_to_first_token": "ttft", "time_per_output_token": "tpot", "inter_token_latency": "itl",
           "request_latency": "e2el"}
TO_MS = {"s": 1e3, "ms": 1.0, "s/token": 1e3, "ms/token": 1.0}
THROUGHPUT = {"output_token_rate": "output_throughput_tps", "total_token_rate": "total_token_throughput_tps",
              "request_rate": "request_throughput_rps"}
STATS = ("mean", "p50", "p90", "p99")
LOAD_KNOBS = ("request_rate", "max_concurrency", "num_prompts")
DURATION = re.compile(r"P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?")


def number(value, field: str = "", path: Path | None = None) -> float | None:
    """A number or numeric string (the schema let both through) as a float; refused where it
    is not finite (a numeric string of 400 digits, "1e400")."""
    if value is None:
        return None
    out = float(value)
    if not math.isfinite(out):
        raise ImportFailed(f"{path}: {field or 'a figure'} is {value!r}, not a finite number")
    return out


def unbounded(value, field: str, path: Path) -> float | None:
    """A rate or a concurrency: a number, or infinity (unbounded); never NaN."""
    if value is None:
        return None
    out = float(value)
    if math.isnan(out):
        raise ImportFailed(f"{path}: {field} is {value!r}, not a number")
    return out


def seconds(duration, path: Path | None = None) -> float | None:
    """An ISO 8601 duration (PT12.345S, P1DT2H) in seconds; None where there is none. One of
    years or months (no fixed length), a negative one, or no duration at all is refused."""
    if duration is None or duration == "":
        return None
    match = DURATION.fullmatch(str(duration))
    if not match or not any(match.groups()):
        raise ImportFailed(f"{path}: run/time/duration is {str(duration)[:40]!r}, not a duration servelab reads "
                           f"(ISO 8601 PnDTnHnMnS, not negative, without years or months)")
    days, hours, minutes, secs = (float(g or 0) for g in match.groups())
    total = ((days * 24 + hours) * 60 + minutes) * 60 + secs
    if not math.isfinite(total):
        raise ImportFailed(f"{path}: run/time/duration {str(duration)[:40]!r} is not a finite duration")
    return total


def engine(report: dict) -> dict:
    return next((c["standardized"] for c in (report.get("scenario") or {}).get("stack") or []
                 if c["standardized"].get("kind") == "inference_engine"), {})


def load(report: dict, path: Path) -> dict:
    """request_rate (inf where the client sent at once), max_concurrency, the load generator."""
    section = (report.get("scenario") or {}).get("load") or {}
    std, args = section.get("standardized") or {}, (section.get("native") or {}).get("args") or {}
    rate = unbounded(std.get("rate_qps"), "scenario/load/standardized/rate_qps", path)
    if rate is None and (args.get("request_rate") in ("inf", math.inf) or isinstance(args.get("request_rate"),
                                                                                      (int, float))):
        rate = requested_rate(args["request_rate"])
    concurrency = unbounded(std.get("concurrency"), "scenario/load/standardized/concurrency", path)
    return {"request_rate": rate,
            "max_concurrency": int(concurrency) if concurrency is not None and math.isfinite(concurrency) else None,
            "num_prompts": args.get("num_prompts") if isinstance(args.get("num_prompts"), int) else None,
            "imported_tool": f"{std.get('tool') or 'unknown'} {std.get('tool_version') or ''}".strip()}


# a statistic's figures agree to a microsecond and a relative 1e-3: servelab's store keeps
# per-request times to the microsecond, the client computed its percentiles from the unrounded
# ones, and a request's latency is rebuilt as its TTFT plus its gaps, each rounded (a p99 0.2-2 us
# under the max in the CPU default's reports; week 11's E2EL p99 3 us over its rebuilt max in
# the CI of 51d38ee)
MICROSECOND = {"s": 1e-6, "s/token": 1e-6, "ms": 1e-3, "ms/token": 1e-3}
ROUNDING_REL = 1e-3


def out_of_order(aggregate: dict) -> list[str]:
    """A statistic whose percentiles do not rise, or whose mean lies outside its min and max,
    by more than a microsecond (MICROSECOND) and ROUNDING_REL."""
    out = []
    for field, stats in ((aggregate.get("latency") or {}) | (aggregate.get("throughput") or {})).items():
        if not isinstance(stats, dict):
            continue
        slack = MICROSECOND.get(stats.get("units"), 0.0)

        def above(a: float, b: float) -> bool:
            return a > b + slack + ROUNDING_REL * abs(b)
        found = [(p, float(stats[p])) for p in llmd_schema.PERCENTILES if stats.get(p) is not None]
        for (lo, a), (hi, b) in zip(found, found[1:]):
            if above(a, b):
                out.append(f"{field} {lo} ({a:g}) above its {hi} ({b:g})")
        low, high, mean = stats.get("min"), stats.get("max"), stats.get("mean")
        if mean is not None and ((low is not None and above(float(low), float(mean))) or
                                 (high is not None and above(float(mean), float(high)))):
            out.append(f"{field} mean ({float(mean):g}) outside its min and max")
    return out


def figures(aggregate: dict, path: Path) -> dict:
    """The table's columns of a report's aggregate request performance."""
    where = "results/request_performance/aggregate"
    row = {}
    for field, prefix in LATENCY.items():
        stats = (aggregate.get("latency") or {}).get(field)
        if stats:
            for stat in STATS:
                if stats.get(stat) is not None:
                    row[f"{prefix}_{stat}_ms"] = number(stats[stat], f"{where}/latency/{field}/{stat}", path) \
                        * TO_MS[stats["units"]]
    for field, column in THROUGHPUT.items():
        if (stats := (aggregate.get("throughput") or {}).get(field)) is not None:
            row[column] = number(stats["mean"], f"{where}/throughput/{field}/mean", path)
    requests = aggregate.get("requests") or {}
    if requests:
        total = int(number(requests["total"], f"{where}/requests/total", path))
        failed = int(number(requests.get("failures") or 0, f"{where}/requests/failures", path))
        incomplete = int(number(requests.get("incomplete") or 0, f"{where}/requests/incomplete", path))
        row.update(prompts_sent=total, failed=failed, completed=total - failed - incomplete)
        if incomplete:
            row["requests_cut"] = incomplete
        for field, column in (("input_length", "total_input_tokens"), ("output_length", "total_output_tokens")):
            if (stats := requests.get(field)) is not None:
                row[column] = number(stats["mean"], f"{where}/requests/{field}/mean", path) * max(row["completed"], 0)
    return row


def identity(ours: dict) -> dict:
    """Who the row is, where servelab's export says (experiment, configuration, point key) and
    its load knobs (`inf` for a rate sent at once)."""
    said = ours.get("identity") if isinstance(ours.get("identity"), dict) else {}
    knobs = ours.get("knobs") if isinstance(ours.get("knobs"), dict) else {}
    out = {k: str(said[k]) for k in ("experiment", "server_point", "point_key") if isinstance(said.get(k), (str, int))}
    out["knobs"] = {str(k): v for k, v in knobs.items() if isinstance(v, (str, int, float, bool))}
    return out


def row(report: dict, path: Path) -> dict:
    if str(report.get("version")) != llmd_schema.VERSION:
        raise ImportFailed(f"{path} is an llm-d benchmark report of version {str(report.get('version'))[:40]!r}; "
                           f"servelab reads version {llmd_schema.VERSION}")
    if problems := llmd_schema.errors(report):
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ImportFailed(f"{path} is not a valid llm-d {llmd_schema.VERSION} report: {problems[0][:200]}{more}")
    results, run = report.get("results") or {}, report["run"]
    aggregate = (results.get("request_performance") or {}).get("aggregate") or {}
    ours = (results.get("observability") or {}).get("servelab_point") or {}
    ours = ours if isinstance(ours, dict) else {}
    who = identity(ours)
    out = {"model": (engine(report).get("model") or {}).get("name"), **load(report, path), **figures(aggregate, path),
           "duration_s": seconds((run.get("time") or {}).get("duration"), path),
           "window": str(ours.get("window", "whole run")),
           "repeats": int(number(ours.get("repeats") or 1, "servelab_point/repeats", path)),
           "engine": engine(report).get("tool"), "engine_version": engine(report).get("tool_version"),
           "date": (run.get("time") or {}).get("start"), "identity": who}
    for knob, v in who["knobs"].items():   # the load point as the table had it; never over a figure
        if knob not in out or knob in LOAD_KNOBS:
            out[knob] = requested_rate(v) if knob == "request_rate" else v
    if isinstance(ours.get("ttft_trend"), (int, float)):
        out["ttft_trend"] = number(ours["ttft_trend"], "servelab_point/ttft_trend", path)
    if isinstance(batch := ours.get("batch_latency_s"), dict):   # servelab's offline latency batch: its own figures
        out.update({f"latency_{s}_s": number(batch[s], f"servelab_point/batch_latency_s/{s}", path)
                    for s in ("mean", "p50", "p90", "p99") if batch.get(s) is not None})
        return {**out, **import_validity.verdict(out, [], [], ours)}
    if not aggregate.get("requests") and not aggregate.get("latency"):
        why = f"the report measured nothing (no request_performance): {run.get('description') or run['uid']}"
        return {**out, "completed": 0, "valid": False, "import_valid": False, "invalid_reason": why,
                "warnings": "", **({"exported_valid": bool(ours["valid"])} if "valid" in ours else {})}
    # as servelab judges its own points: completed against what was sent, less what a point
    # sized in time cut at its end
    sent = out["prompts_sent"] - (out.get("requests_cut") or 0) if "prompts_sent" in out else out["num_prompts"]
    problems, warnings, columns = checks.load_checks(out, {"num_prompts": sent},
                                                     out["request_rate"] if out["request_rate"] is not None
                                                     else math.inf)
    problems += [f"impossible: {p}" for p in out_of_order(aggregate)]
    return {**out, **columns, **import_validity.verdict(out, problems, warnings, ours)}
