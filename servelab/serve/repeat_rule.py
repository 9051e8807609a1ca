"""How many times a point is measured: `repeats`, or, under `repeat_until`, as many as its
target interval needs.

`repeat_until: {metric, within, least, most}` measures every point `least` times (the
first stage), then gives each point the repeats that Stein's two-stage rule asks from its
first stage's spread (servelab.stats.stein_repeats), at most `most`. The decision
depends on the first stage alone, so a rerun makes the same one, and the interval it
reports (the first stage's t and spread over sqrt(n)) keeps its 95 % coverage: a rule
that stopped once the interval looked tight would stop on luckily low spreads and report
intervals that are too narrow. Each of the point's records carries the decision
(`repeat_rule`): how many repeats, why they stopped, the interval they give.
"""

from __future__ import annotations

from servelab.search import steady_window
from servelab.stats import stein_repeats

# the metrics a target may name: the saved result's keys, read over the held window
LEAST, MOST = 3, 6   # the default first stage and most repeats
TARGET_METRICS = ("output_throughput", "request_throughput", "total_token_throughput",
                  "p50_ttft_ms", "p50_itl_ms", "p50_tpot_ms", "p50_e2el_ms", "mean_ttft_ms", "mean_itl_ms")


def first_stage(rule: dict | None, repeats: int) -> int:
    return int(rule.get("least", LEAST)) if rule else repeats


def target_value(bench: dict | None, metric: str) -> float | None:
    """The metric of one repeat, over its held window where it held (as the tables read it)."""
    value = (steady_window.held(bench) or {}).get(metric)
    return float(value) if isinstance(value, (int, float)) and value == value else None


def decide(rule: dict, results: list[dict | None]) -> dict:
    """The decision from the first stage's saved results (None: a failed repeat): {repeats,
    stopped, ci95_pct, first_stage}. A failed repeat or a missing value stops at the first
    stage (the row says so and is not valid anyway)."""
    values = [target_value(r, rule["metric"]) for r in results]
    target = f"{rule['metric']} within +-{100 * rule['within']:g} %"
    if any(v is None for v in values) or len(values) < 2:
        return {"repeats": len(values), "stopped": f"first stage incomplete ({target} not judged)",
                "ci95_pct": None, "first_stage": values}
    n, half = stein_repeats(values, float(rule["within"]), int(rule.get("most", MOST)))
    met = half <= rule["within"] + 1e-12
    stopped = (f"{target}: met at {n} repeats" if met else
               f"{target}: most ({n}) reached, +-{100 * half:.1f} %")
    return {"repeats": n, "stopped": stopped, "ci95_pct": 100 * half, "first_stage": values, "met": met}
