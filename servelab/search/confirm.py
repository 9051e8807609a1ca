"""Repeats at a search's frontier, before a winner is crowned.

Each configuration a search tries is measured once per load step, so two goodputs a few
per cent apart may be noise. Once the exploration ends, the configuration with the highest
goodput and its runner-up are measured again at their own goodput loads (`confirm_repeats`
times in all, the search's own measurement counted as the first; a new session each, no
new bisection). The decision between them is then Welch's t on those repeats: the higher
wins alone only where the 95 % interval of the difference excludes zero; otherwise they
are a tie, and the search's tie rule (the cheapest) decides. A tie says which it is:
equivalent within +-`tie_within` (the two one-sided tests at 95 %), or undecided (the
repeats cannot tell: more of them, or longer points, would).
"""

from __future__ import annotations

import math
import statistics

from servelab.stats import welch, welch90
from servelab.config.experiments import point_id
from servelab.search import steady_window
from servelab.search import slo as slo_check

DEFAULT_REPEATS = 3
METHOD = ("Welch's t on the repeats' goodput (output throughput at the goodput load), 95 % two-sided; "
          "equivalence: two one-sided tests at 95 % within +-tie_within")


def repeats(search: dict) -> int:
    return int(search.get("confirm_repeats", DEFAULT_REPEATS))


def frontier(search: dict, tried: list[tuple[dict, float]], outcomes: dict[str, dict]) -> list[dict]:
    """The two configurations to confirm: the highest goodput and the runner-up (first
    tried on equal goodput), each with the load its goodput was measured at; none where
    repeats are off or fewer than two configurations met the SLO."""
    ranked = sorted((t for t in tried if t[1] > 0), key=lambda t: -t[1])
    if repeats(search) < 2 or len(ranked) < 2:
        return []
    return [{"server_point": point_id(config), "config": config,
             "load": outcomes[point_id(config)]["max_load"], "goodput_tps": goodput}
            for config, goodput in ranked[:2]]


def samples(points: list[tuple[dict, dict | None]], slo: dict) -> dict:
    """{goodput: [output tok/s of each repeat, over its held window], slo_met: how many repeats met the SLO}."""
    values, met = [], 0
    for record, bench in points:
        ok = slo_check.judge(slo, bench, record.get("failure"))[0]
        met += bool(ok)
        values.append(float((steady_window.held(bench) or {}).get("output_throughput") or 0.0))
    return {"goodput": values, "slo_met": met}


def summary(values: list[float]) -> tuple[float, float | None]:
    """Mean and standard error (None for one value)."""
    mean = statistics.fmean(values)
    return mean, (statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None)


def decide(entries: list[dict], measured: dict[str, dict], margin: float = 0.05) -> dict:
    """The verdict between the frontier's two configurations from their repeats:
    {configs: {server point: mean, repeats, slo_met}, diff_pct (runner-up against the
    highest), ci95_pct, verdict, higher}."""
    top, runner = (e["server_point"] for e in entries)
    configs = {}
    for sp in (top, runner):
        values = measured[sp]["goodput"]
        mean, _ = summary(values)
        configs[sp] = {"goodput_tps_mean": mean, "goodput_tps": values, "repeats": len(values),
                       "slo_met": f"{measured[sp]['slo_met']}/{len(values)}"}
    out = {"method": METHOD, "configs": configs}
    (mean_a, se_a), (mean_b, se_b) = summary(measured[top]["goodput"]), summary(measured[runner]["goodput"])
    if se_a is None or se_b is None or not mean_a:
        return {**out, "verdict": "not measured twice", "higher": top}
    diff, half = welch(mean_a, se_a, len(measured[top]["goodput"]), mean_b, se_b=se_b, n_b=len(measured[runner]["goodput"]))
    low, high = 100 * (diff - half) / mean_a, 100 * (diff + half) / mean_a
    half90 = welch90(mean_a, se_a, len(measured[top]["goodput"]), mean_b, se_b=se_b,
                     n_b=len(measured[runner]["goodput"]))
    low90, high90 = 100 * (diff - half90) / mean_a, 100 * (diff + half90) / mean_a
    distinct = not (low <= 0 <= high)
    same = not distinct and -100 * margin <= low90 and high90 <= 100 * margin
    return {**out, "diff_pct": 100 * diff / mean_a, "ci95_pct": [low, high], "ci90_pct": [low90, high90],
            "verdict": "distinguishable" if distinct else
            (f"equivalent within +-{100 * margin:g} %" if same else "undecided"),
            "higher": runner if distinct and low > 0 else top}
