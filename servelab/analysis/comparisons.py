"""Is a difference real? Each configuration of an experiment against its baseline, at each
load point, in the headline metrics: the difference in % of the baseline with its 95 %
interval (Welch's t on the repeats), the smallest difference the spread could have shown,
and a verdict that tells "equal" from "cannot tell": better or worse (the 95 % interval
excludes 0), equivalent (the two one-sided tests at 95 %: the 90 % interval lies inside
+-margin, `equivalence_margin`), else undecided (the interval is too wide for either). Each figure is the held window's where both points held their load (the
`steady_` columns), else the whole run's; the `window` column says which.

Where both points were measured in the same interleaved rounds (servelab/serve/rounds.py),
the comparison is paired: each round's ratio to the baseline, Student's t on their logs
(servelab.analysis.paired), the rows' `METRIC_by_round`; `design`, `rounds` and
`round_order` say so. Where the client's ITL contradicts the engine's own step (tokens in
bursts: servelab.analysis.checks.itl_against_record), no ITL verdict is drawn.

Otherwise (sequential), from the table alone: a row with repeats holds each metric's mean and the half-width of
its 95 % interval (servelab.analysis.repeats), from which the standard error is recovered.
The interval is of the difference of the means, relative to the baseline's mean (the
baseline's own uncertainty in the denominator is not propagated: it is second order at
the spreads measured here).
"""

from __future__ import annotations

import math

import pandas as pd

from servelab.analysis import paired
from servelab.stats import t95, welch, welch90

METHOD = ("Welch's t on the repeats' means, 95 % two-sided; equivalence: two one-sided tests at 95 % "
          "(the 90 % interval inside +-margin); difference in % of the baseline's mean")
# a difference under this fraction of the baseline counts as no difference (per experiment)
EQUIVALENCE_MARGIN = 0.05
# the headline metrics and which way is better
HEADLINE = {"ttft_p50_ms": "lower", "ttft_p99_ms": "lower", "itl_p50_ms": "lower", "itl_p99_ms": "lower",
            "output_throughput_tps": "higher", "goodput_rps": "higher"}
NOT_TWICE = "not measured twice"
UNDECIDED = "undecided"
COLUMNS = ["configuration", "baseline", "load_point", "metric", "window", "better_when", "baseline_mean", "mean",
           "diff_pct", "ci95_low_pct", "ci95_high_pct", "ci90_low_pct", "ci90_high_pct", "margin_pct",
           "detectable_pct", "repeats_baseline", "repeats", "verdict", "method", "design", "rounds", "round_order"]
SEQUENTIAL = "sequential (each configuration's repeats back to back)"
# where the client's ITL contradicts the engine's record (servelab.analysis.checks.itl_against_record)
CONTRADICTED = "not comparable: the client's ITL contradicts the engine's step (tokens in bursts)"


def standard_error(row: pd.Series, metric: str) -> float | None:
    """The mean's standard error from its 95 % half-width and the repeat count."""
    n, half = int(row.get("repeats") or 1), row.get(f"{metric}_ci95")
    if n < 2 or half is None or (isinstance(half, float) and math.isnan(half)):
        return None
    return float(half) / t95(n - 1)


def equivalent(margin_pct: float) -> str:
    return f"equivalent within +-{margin_pct:g} %"


def verdict(low: float, high: float, better_when: str, low90: float | None = None, high90: float | None = None,
            margin_pct: float = 100 * EQUIVALENCE_MARGIN) -> str:
    """better / worse where the 95 % interval excludes 0; equivalent where the 90 % one
    lies inside +-margin (TOST); else undecided. Both bounds are in % of the baseline."""
    if not low <= 0 <= high:
        return "better" if (low > 0) == (better_when == "higher") else "worse"
    if low90 is not None and -margin_pct <= low90 and high90 <= margin_pct:
        return equivalent(margin_pct)
    return UNDECIDED


def held_column(base: pd.Series, other: pd.Series, metric: str) -> tuple[str, str]:
    """The column a comparison reads, and its window: the held window's figure where both
    points held their load (servelab.search.steady_window), else the whole run's."""
    steady = f"steady_{metric}"

    def held(row: pd.Series) -> bool:
        """Its figure over the held window, and, where repeated, over the held window of
        every repeat (else the interval, or the pairing, would have fewer repeats than said)."""
        if row.get("window") != "steady" or pd.isna(row.get(steady)) or int(row.get("repeats") or 1) < 2:
            return row.get("window") == "steady" and not pd.isna(row.get(steady))
        if in_rounds(base, other):
            values = paired.parse(row.get(f"{steady}_by_round"))
            return len(values) >= 2 and None not in values
        return not pd.isna(row.get(f"{steady}_ci95"))

    if held(base) and held(other):
        return steady, "steady"
    return metric, "whole run"


def compare_rows(base: pd.Series, other: pd.Series, metric: str, margin: float = EQUIVALENCE_MARGIN) -> dict:
    """One metric of one configuration against the baseline at one load point."""
    better_when = HEADLINE[metric]
    column, window = held_column(base, other, metric)
    out = {"metric": metric, "window": window, "better_when": better_when, "margin_pct": 100 * margin,
           "repeats_baseline": int(base.get("repeats") or 1), "repeats": int(other.get("repeats") or 1),
           "method": METHOD}
    metric = column
    rounds = in_rounds(base, other)
    out.update(design=base["design"] if rounds else SEQUENTIAL, round_order=base.get("round_order") if rounds else None)
    mean_a, mean_b = base.get(metric), other.get(metric)
    if pd.isna(mean_a) or pd.isna(mean_b) or not mean_a:
        return {**out, "verdict": "not measured"}
    out.update(baseline_mean=float(mean_a), mean=float(mean_b), diff_pct=100 * (mean_b - mean_a) / mean_a)
    if not (bool(base.get("valid", True)) and bool(other.get("valid", True))):
        return {**out, "verdict": "not comparable: a point is not valid"}
    contradicted = metric.removeprefix("steady_").startswith("itl_") and \
        any(row.get("itl_contradicts_record") is True for row in (base, other))
    if contradicted and (rounds or min(out["repeats_baseline"], out["repeats"]) >= 2):
        return {**out, "verdict": CONTRADICTED}   # (a point measured once has no verdict anyway)
    if rounds:
        pair = paired_rounds(base, other, metric)
        if pair is None:   # fewer than two rounds where both measured the metric
            return {**out, "verdict": NOT_TWICE}
        return {**out, **pair, "verdict": verdict(pair["ci95_low_pct"], pair["ci95_high_pct"], better_when,
                                                  pair["ci90_low_pct"], pair["ci90_high_pct"], 100 * margin)}
    se_a, se_b = standard_error(base, metric), standard_error(other, metric)
    if se_a is None or se_b is None:
        return {**out, "verdict": NOT_TWICE}
    diff, half = welch(mean_a, se_a, out["repeats_baseline"], mean_b, se_b=se_b, n_b=out["repeats"])
    half90 = welch90(mean_a, se_a, out["repeats_baseline"], mean_b, se_b=se_b, n_b=out["repeats"])
    low, high = 100 * (diff - half) / mean_a, 100 * (diff + half) / mean_a
    low90, high90 = 100 * (diff - half90) / mean_a, 100 * (diff + half90) / mean_a
    return {**out, "ci95_low_pct": low, "ci95_high_pct": high, "ci90_low_pct": low90, "ci90_high_pct": high90,
            "detectable_pct": 100 * half / abs(mean_a),
            "verdict": verdict(low, high, better_when, low90, high90, 100 * margin)}


def in_rounds(base: pd.Series, other: pd.Series) -> bool:
    """Both points measured in the same interleaved rounds (servelab.serve.rounds)."""
    design = base.get("design")
    return isinstance(design, str) and design.startswith(paired.DESIGN) and other.get("design") == design


def paired_rounds(base: pd.Series, other: pd.Series, metric: str) -> dict | None:
    """The paired interval of two points measured in the same interleaved rounds
    (servelab.analysis.paired): each round's ratio, t on their logs; None where fewer than
    two rounds pair up."""
    design = base.get("design")
    logs = paired.log_ratios(paired.parse(base.get(f"{metric}_by_round")), paired.parse(other.get(f"{metric}_by_round")))
    if logs is None:
        return None
    found = paired.interval(logs)
    return {**found, "repeats_baseline": found["rounds"], "repeats": found["rounds"], "design": design,
            "round_order": base.get("round_order"), "method": paired.METHOD}


def load_point(row: pd.Series, load_knobs: list[str]) -> str:
    return ", ".join(f"{k}={row[k]}" for k in load_knobs if k in row and not pd.isna(row[k])) or "the one load"


def compare(table: pd.DataFrame, load_knobs: list[str], baseline: str | None = None,
            margin: float = EQUIVALENCE_MARGIN) -> pd.DataFrame:
    """Every configuration (server point) against `baseline` (default: the first in the
    table) at each load point, for each headline metric the table has; `margin`: the
    equivalence margin, a fraction of the baseline."""
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
                         "load_point": other["_load"], **compare_rows(base, other, metric, margin)})
    return pd.DataFrame(rows, columns=COLUMNS)
