"""Repeats of one point as one row: the mean of each measured quantity and the half-width
of its 95 % confidence interval (Student's t over the repeats), so that a difference
between two configurations can be told from noise."""

from __future__ import annotations

import math

from servelab.analysis import paired
from servelab.stats import mean_ci95

# measured quantities (everything else in a row is a knob, a fact or a name)
MEASURED_SUFFIXES = ("_ms", "_s", "_rps", "_tps")
MEASURED = ("ttft_trend", "steady_ttft_trend", "prefix_cache_hit_rate", "spec_acceptance_rate", "spec_mean_accepted_len",
            "preemptions", "peak_kv_cache_usage", "outside_cpu_cores", "client_cpu_cores",
            # a point's record of its conditions (servelab.analysis.bound)
            "running_mean", "waiting_mean", "kv_usage_mean", "running_max", "waiting_max", "kv_usage_max",
            "idle_fraction", "step_tokens_mean", "step_read_mb", "record_preemptions")
MEASURED_PREFIXES = ("cpu_", "gpu_")
NOT_MEASURED = ("server_startup_s", "ttft_floor_ms", "itl_floor_ms", "theory_latency_s", "theory_decode_step_ms",
                "grace_s")


def is_measured(column: str) -> bool:
    return column not in NOT_MEASURED and (column in MEASURED or column.endswith(MEASURED_SUFFIXES)
                                           or column.startswith(MEASURED_PREFIXES))


def number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) else None


def aggregate(rows: list[dict]) -> dict:
    """One row for the repeats of a point: knobs and facts from the first repeat, each
    measured column's mean with `COLUMN_ci95`; valid only if every repeat was."""
    first = dict(rows[0])
    first.pop("repeat", None)
    first["repeats"] = len(rows)
    # how many repeats warned: a figure rings a point that most of its repeats warned, and
    # marks one that only some did apart (one repeat of three short of its rate is not the point)
    first["warned_repeats"] = sum(bool(row.get("warnings")) for row in rows)
    if len(rows) == 1:
        return first
    # in the order the rows name them: a table's columns are the same in every run (a set's
    # order changes with each process's string hashing, and the archive compares tables)
    for column in dict.fromkeys(c for row in rows for c in row if is_measured(c)):
        values = [v for row in rows if (v := number(row.get(column))) is not None]
        if values:
            first[column], first[f"{column}_ci95"] = mean_ci95(values)
    first["valid"] = all(bool(row.get("valid")) for row in rows)
    for column in ("invalid_reason", "warnings"):
        first[column] = repeat_notes(rows, column)
    # every repeat's raw files, so that the mean can be traced to each measurement
    for column in ("point_key", "raw_json", "record_json"):
        first[column] = ";".join(str(row.get(column)) for row in rows)
    if any("round_index" in row for row in rows):
        first.update(by_round(rows))
        first.pop("round_index", None)
    return first


def by_round(rows: list[dict]) -> dict:
    """A point measured in interleaved rounds (servelab.serve.rounds): its design, each
    round's order, and each paired metric round by round (servelab.analysis.paired), so that
    comparisons pair it with its baseline from the table alone."""
    rounds = max(int(row.get("round_index", 0)) for row in rows) + 1
    at = {int(row["round_index"]): row for row in rows if "round_index" in row}
    seed = next((row["round_seed"] for row in rows if row.get("round_seed") is not None), None)
    out = {"design": f"{paired.DESIGN} (seed {seed})", "rounds": len(at),
           "round_order": " | ".join(at[r].get("round_order", "") if r in at else "" for r in range(rounds))}
    for metric in paired.METRICS:
        if any(metric in row for row in rows):
            out[f"{metric}_by_round"] = paired.cell([number(at[r].get(metric)) if r in at else None
                                                     for r in range(rounds)])
    return out


def repeat_notes(rows: list[dict], column: str) -> str:
    """The repeats' notes, each text once with the repeats that gave it (a session's drift
    is the same note on every repeat of its points)."""
    by_text: dict[str, list[int]] = {}
    for row in rows:
        if row.get(column):
            by_text.setdefault(row[column], []).append(row.get("repeat", 0) + 1)
    return "; ".join(f"every repeat: {text}" if len(which) == len(rows) > 1 else
                     f"repeat{'s' if len(which) > 1 else ''} {', '.join(map(str, which))}: {text}"
                     for text, which in by_text.items())


def group_repeats(rows: list[tuple[str, dict]]) -> list[list[dict]]:
    """[(point, row)] with each point's repeats anywhere in the list, grouped by point
    in the order the points first appear."""
    groups: dict[str, list[dict]] = {}
    for point, row in rows:
        groups.setdefault(point, []).append(row)
    return list(groups.values())
