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
from servelab.export import llmd_schema
from servelab.export.import_failed import ImportFailed

LATENCY = {"time_to_first_token": "ttft", "time_per_output_token": "tpot", "inter_token_latency": "itl",
           "request_latency": "e2el"}
TO_MS = {"s": 1e3, "ms": 1.0, "s/token": 1e3, "ms/token": 1.0}
THROUGHPUT = {"output_token_rate": "output_throughput_tps", "total_token_rate": "total_token_throughput_tps",
              "request_rate": "request_throughput_rps"}
STATS = ("mean", "p50", "p90", "p99")
DURATION = re.compile(r"P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?")


def number(value) -> float | None:
    return None if value is None else float(value)   # the schema let through numbers and numeric strings


def seconds(duration) -> float | None:
    """An ISO 8601 duration (PT12.345S, P1DT2H) in seconds; None where it is not one."""
    match = DURATION.fullmatch(str(duration or ""))
    if not match or not any(match.groups()):
        return None
    days, hours, minutes, secs = (float(g or 0) for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + secs


def engine(report: dict) -> dict:
    return next((c["standardized"] for c in (report.get("scenario") or {}).get("stack") or []
                 if c["standardized"].get("kind") == "inference_engine"), {})


def load(report: dict) -> dict:
    """request_rate (inf where the client sent at once), max_concurrency, the load generator."""
    section = (report.get("scenario") or {}).get("load") or {}
    std, args = section.get("standardized") or {}, (section.get("native") or {}).get("args") or {}
    rate = number(std.get("rate_qps"))
    if rate is None and (args.get("request_rate") in ("inf", math.inf) or isinstance(args.get("request_rate"),
                                                                                      (int, float))):
        rate = requested_rate(args["request_rate"])
    concurrency = std.get("concurrency")
    return {"request_rate": rate,
            "max_concurrency": int(number(concurrency)) if concurrency is not None and
            math.isfinite(number(concurrency)) else None,
            "num_prompts": args.get("num_prompts") if isinstance(args.get("num_prompts"), int) else None,
            "imported_tool": f"{std.get('tool') or 'unknown'} {std.get('tool_version') or ''}".strip()}


def figures(aggregate: dict) -> dict:
    """The table's columns of a report's aggregate request performance."""
    row = {}
    for field, prefix in LATENCY.items():
        stats = (aggregate.get("latency") or {}).get(field)
        if stats:
            for stat in STATS:
                if stats.get(stat) is not None:
                    row[f"{prefix}_{stat}_ms"] = number(stats[stat]) * TO_MS[stats["units"]]
    for field, column in THROUGHPUT.items():
        if (stats := (aggregate.get("throughput") or {}).get(field)) is not None:
            row[column] = number(stats["mean"])
    requests = aggregate.get("requests") or {}
    if requests:
        total, failed = int(number(requests["total"])), int(number(requests.get("failures") or 0))
        completed = total - failed - int(number(requests.get("incomplete") or 0))
        row.update(prompts_sent=total, failed=failed, completed=completed)
        for field, column in (("input_length", "total_input_tokens"), ("output_length", "total_output_tokens")):
            if (stats := requests.get(field)) is not None:
                row[column] = number(stats["mean"]) * completed
    return row


def row(report: dict, path: Path) -> dict:
    if str(report.get("version")) != llmd_schema.VERSION:
        raise ImportFailed(f"{path} is an llm-d benchmark report of version {report.get('version')!r}; servelab "
                           f"reads version {llmd_schema.VERSION}")
    if problems := llmd_schema.errors(report):
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ImportFailed(f"{path} is not a valid llm-d {llmd_schema.VERSION} report: {problems[0][:200]}{more}")
    results, run = report.get("results") or {}, report["run"]
    aggregate = (results.get("request_performance") or {}).get("aggregate") or {}
    ours = (results.get("observability") or {}).get("servelab_point") or {}
    out = {"model": (engine(report).get("model") or {}).get("name"), **load(report), **figures(aggregate),
           "duration_s": seconds((run.get("time") or {}).get("duration")), "window": ours.get("window", "whole run"),
           "repeats": int(ours.get("repeats") or 1), "engine": engine(report).get("tool"),
           "engine_version": engine(report).get("tool_version"), "date": (run.get("time") or {}).get("start")}
    if batch := ours.get("batch_latency_s"):   # servelab's offline latency batch: its own figures
        out.update({f"latency_{s}_s": number(batch[s]) for s in ("mean", "p50", "p90", "p99") if s in batch})
        return {**out, "valid": bool(ours.get("valid", True)), "invalid_reason": ours.get("invalid_reason") or "",
                "warnings": ours.get("warnings") or ""}
    if not aggregate.get("requests") and not aggregate.get("latency"):
        why = f"the report measured nothing (no request_performance): {run.get('description') or run['uid']}"
        return {**out, "completed": 0, "valid": False, "invalid_reason": why, "warnings": ""}
    problems, warnings, columns = checks.load_checks(out, {"num_prompts": out["num_prompts"]},
                                                     out["request_rate"] if out["request_rate"] is not None
                                                     else math.inf)
    if "valid" in ours:   # servelab's own judgement of its point, kept
        problems = [] if ours["valid"] else [ours.get("invalid_reason") or "invalid in servelab's run"]
        warnings = [ours["warnings"]] if ours.get("warnings") else []
    return {**out, **columns, "valid": not problems, "invalid_reason": "; ".join(problems),
            "warnings": "; ".join(warnings)}
