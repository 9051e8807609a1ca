"""Is a difference real? Each configuration of an experiment against its baseline, at each
load point, in the headline metrics: the difference in % of the baseline with its 95 %
interval (Welch's t on the repeats), the smallest difference the spread could have shown,
and a verdict. Each figure is the held window's where both points held their load (the
`steady_` columns), else the whole run's; the `window` column says which.

From the table alone: a row with repeats holds each metric's mean and the half-width of
its 95 % interval (servelab.analysis.repeats), from which the standard error is recovered.
The interval is of the difference of the means, relative to the baseline's mean (the
baseline's own uncertainty in the denominator is not propagated: it is second order at
the spreads measured here).
"""

from __future__ import annotations

import math

import pandas as pd

from servelab.stats import t95, welch

METHOD = "Welch's t on the repeats' means, 95 % two-sided; difference in % of the baseline's mean"
# the headline metrics and which way is better
HEADLINE = {"ttft_p50_ms": "lower", "ttft_p99_ms": "lower", "itl_p50_ms": "lower", "itl_p99_ms": "lower",
            "output_throughput_tps": "higher", "goodput_rps": "higher"}
NOT_TWICE = "not measured twice"
TIE = "not distinguishable"
COLUMNS = ["configuration", "baseline", "load_point", "metric", "window", "better_when", "baseline_mean", "mean",
           "diff_pct", "ci95_low_pct", "ci95_high_pct", "detectable_pct", "repeats_baseline", "repeats",
           "verdict", "method"]


def standard_error(row: pd.Series, metric: str) -> float | None:
    """The mean's standard error from its 95 % half-width and the repeat count."""
    n, half = int(row.get("repeats") or 1), row.get(f"{metric}_ci95")
    if n < 2 or half is None or (isinstance(half, float) and math.isnan(half)):
        return None
    return float(half) / t95(n - 1)


def verdict(low: float, high: float, better_when: str) -> str:
    if low <= 0 <= high:
        return TIE
    up = low > 0
    return "better" if up == (better_when == "higher") else "worse"


def held_column(base: pd.Series, other: pd.Series, metric: str) -> tuple[str, str]:
    """The column a comparison reads, and its window: the held window's figure where both
    points held their load (servelab.search.steady_window), else the whole run's."""
    steady = f"steady_{metric}"
    if all(row.get("window") == "steady" and not pd.isna(row.get(steady)) for row in (base, other)):
        return steady, "steady"
    return metric, "whole run"


def compare_rows(base: pd.Series, other: pd.Series, metric: str) -> dict:
    """One metric of one configuration against the baseline at one load point."""
    better_when = HEADLINE[metric]
    column, window = held_column(base, other, metric)
    out = {"metric": metric, "window": window, "better_when": better_when,
           "repeats_baseline": int(base.get("repeats") or 1), "repeats": int(other.get("repeats") or 1),
           "method": METHOD}
    metric = column
    mean_a, mean_b = base.get(metric), other.get(metric)
    if pd.isna(mean_a) or pd.isna(mean_b) or not mean_a:
        return {**out, "verdict": "not measured"}
    out.update(baseline_mean=float(mean_a), mean=float(mean_b), diff_pct=100 * (mean_b - mean_a) / mean_a)
    if not (bool(base.get("valid", True)) and bool(other.get("valid", True))):
        return {**out, "verdict": "not comparable: a point is not valid"}
    se_a, se_b = standard_error(base, metric), standard_error(other, metric)
    if se_a is None or se_b is None:
        return {**out, "verdict": NOT_TWICE}
    diff, half = welch(mean_a, se_a, out["repeats_baseline"], mean_b, se_b=se_b, n_b=out["repeats"])
    low, high = 100 * (diff - half) / mean_a, 100 * (diff + half) / mean_a
    return {**out, "ci95_low_pct": low, "ci95_high_pct": high, "detectable_pct": 100 * half / abs(mean_a),
            "verdict": verdict(low, high, better_when)}


def load_point(row: pd.Series, load_knobs: list[str]) -> str:
    return ", ".join(f"{k}={row[k]}" for k in load_knobs if k in row and not pd.isna(row[k])) or "the one load"


def compare(table: pd.DataFrame, load_knobs: list[str], baseline: str | None = None) -> pd.DataFrame:
    """Every configuration (server point) against `baseline` (default: the first in the
    table) at each load point, for each headline metric the table has."""
    if table.empty or table["server_point"].nunique() < 2:
        return pd.DataFrame(columns=COLUMNS)
    configurations = list(dict.fromkeys(table["server_point"]))
    baseline = baseline or configurations[0]
    if baseline not in configurations:
        raise ValueError(f"baseline {baseline!r} is not a configuration of this experiment "
                         f"(configurations: {configurations})")
    metrics = [m for m in HEADLINE if m in table.columns]
    keyed = table.assign(_load=[load_point(r, load_knobs) for _, r in table.iterrows()])
    base_rows = {r["_load"]: r for _, r in keyed[keyed["server_point"] == baseline].iterrows()}
    rows = []
    for _, other in keyed[keyed["server_point"] != baseline].iterrows():
        base = base_rows.get(other["_load"])
        if base is None:
            continue
        for metric in metrics:
            rows.append({"configuration": other["server_point"], "baseline": baseline,
                         "load_point": other["_load"], **compare_rows(base, other, metric)})
    return pd.DataFrame(rows, columns=COLUMNS)
