"""Paired comparisons over interleaved rounds (servelab/analysis/paired.py): each round's
ratio to the baseline, t on their logs, Stein's rule on them; and why: under a drift of the
box, the sequential design (every repeat of A, then every repeat of B) reads the drift as a
difference, the paired design does not."""
import math
import random
import statistics

import pandas as pd
import pytest

from servelab.analysis import comparisons, paired
from servelab.serve.rounds import round_order
from servelab.stats import mean_ci95, t95


def test_the_paired_interval_is_t_on_the_logs_of_each_rounds_ratio():
    base, other = [100.0, 120.0, 90.0, 110.0], [110.0, 131.0, 100.0, 120.0]   # ~+10 % in every round
    logs = paired.log_ratios(base, other)
    assert logs == pytest.approx([math.log(b / a) for a, b in zip(base, other)])
    found = paired.interval(logs)
    mean, half = statistics.fmean(logs), t95(3) * statistics.stdev(logs) / 2
    assert found["diff_pct"] == pytest.approx(100 * (math.exp(mean) - 1))
    assert found["ci95_low_pct"] == pytest.approx(100 * (math.exp(mean - half) - 1))
    assert found["ci95_high_pct"] == pytest.approx(100 * (math.exp(mean + half) - 1))
    assert found["rounds"] == 4 and 8 < found["ci95_low_pct"] < found["ci95_high_pct"] < 12
    # the rounds the baseline swung by 30 % do not widen it: they cancel in the ratio
    assert found["ci95_high_pct"] - found["ci95_low_pct"] < 3.5
    # x1.25 and x0.8 are as far from 1 each way; a missing or failed round is left out
    assert paired.log_ratios([1.0, 1.0], [1.25, 0.8]) == pytest.approx([math.log(1.25), -math.log(1.25)])
    assert paired.log_ratios([1.0, None, 2.0], [1.1, 3.0, 2.2]) == pytest.approx([math.log(1.1)] * 2)
    assert paired.log_ratios([1.0, None], [1.0, 2.0]) is None


def test_steins_rule_asks_more_rounds_of_a_wider_spread_up_to_the_most():
    assert paired.stein_rounds([0.01, 0.011, 0.009], within=0.03, most=6) == 3
    assert paired.stein_rounds([0.0, 0.05, -0.05], within=0.03, most=6) == 6
    tight = paired.stein_rounds([0.0, 0.02, -0.02], within=0.03, most=20)
    assert tight == math.ceil((t95(2) * 0.02 / math.log1p(0.03)) ** 2)


def test_a_rounds_order_is_drawn_from_its_seed_and_differs_round_to_round():
    names = ["baseline", "seqs4", "seqs8"]
    assert round_order(0, 2, names) == round_order(0, 2, list(names))   # any box, any rerun
    orders = {tuple(round_order(7, r, names)) for r in range(40)}
    assert len(orders) == 6 and all(sorted(o) == sorted(names) for o in orders)
    assert [round_order(1, r, names) for r in range(5)] != [round_order(2, r, names) for r in range(5)]


def table_rows(base: list[float], other: list[float], seed: int | None) -> pd.DataFrame:
    """Two rows of metrics.csv as the repeats aggregator writes them; in rounds where seed is given."""
    rows = []
    for name, values in (("baseline", base), ("twin", other)):
        mean, half = mean_ci95(values)
        row = {"server_point": name, "request_rate": 4, "repeats": len(values), "valid": True,
               "output_throughput_tps": mean, "output_throughput_tps_ci95": half}
        if seed is not None:
            row.update(design=f"{paired.DESIGN} (seed {seed})", rounds=len(values),
                       output_throughput_tps_by_round=paired.cell(values), round_order="baseline>twin | twin>baseline")
        rows.append(row)
    return pd.DataFrame(rows)


def a_a(rng: random.Random, rounds: int, interleaved: bool) -> str:
    """One A/A pair on a box whose speed drifts 6 % a minute (a point: ~10 s), with 2 % noise:
    the verdict comparisons draws."""
    turns = [(r, arm) for r in range(rounds) for arm in rng.sample(["a", "b"], 2)] if interleaved else \
        [(r, arm) for arm in ("a", "b") for r in range(rounds)]
    values = {"a": [0.0] * rounds, "b": [0.0] * rounds}
    for t, (r, arm) in enumerate(turns):
        values[arm][r] = 1000 * (1 - 0.06 * t * 10 / 60) * (1 + rng.gauss(0, 0.02))
    compared = comparisons.compare(table_rows(values["a"], values["b"], 0 if interleaved else None), ["request_rate"])
    return compared["verdict"].iloc[0]


def test_under_drift_the_sequential_design_finds_a_difference_between_twins_and_rounds_do_not():
    rng = random.Random(2017)
    sequential = [a_a(rng, 6, interleaved=False) for _ in range(200)]
    interleaved = [a_a(rng, 6, interleaved=True) for _ in range(200)]
    false_sequential = sum(v in ("better", "worse") for v in sequential) / 200
    false_interleaved = sum(v in ("better", "worse") for v in interleaved) / 200
    print(f"\nA/A under drift, 200 pairs of 6 repeats: sequential {false_sequential:.0%} better/worse, "
          f"interleaved {false_interleaved:.0%}")
    assert false_sequential > 0.8            # the drift read as a difference
    assert false_interleaved <= 0.09         # ~5 % at 95 %, as a t interval should
    assert sum(v.startswith("equivalent") for v in interleaved) / 200 >= 0.8


def test_comparisons_say_their_design_rounds_and_order_and_pair_only_the_same_rounds():
    compared = comparisons.compare(table_rows([100, 130, 90], [110, 143, 99], seed=3), ["request_rate"])
    got = compared.iloc[0]
    assert got["design"] == "interleaved rounds (seed 3)" and got["rounds"] == 3
    assert got["round_order"] == "baseline>twin | twin>baseline" and got["method"] == paired.METHOD
    assert got["verdict"] == "better" and got["ci95_low_pct"] == pytest.approx(10, abs=1e-6)
    # the figure's legend names the paired method, not Welch's
    from servelab.analysis.comparison_plot import legend_text
    assert paired.METHOD in legend_text(compared) and "Welch" not in legend_text(compared)
    # Welch on the same repeats, unpaired: the baseline's 30 % swing hides the difference
    seq = comparisons.compare(table_rows([100, 130, 90], [110, 143, 99], seed=None), ["request_rate"]).iloc[0]
    assert seq["design"] == comparisons.SEQUENTIAL and seq["verdict"] == "undecided"


def test_no_itl_verdict_where_the_client_contradicts_the_engines_step():
    from servelab.analysis.checks import itl_against_record

    bursts = itl_against_record({"itl_p50_ms": 0.003, "step_ms": 6.7, "idle_fraction": 0.0, "warnings": ""})
    assert bursts["itl_contradicts_record"] is True and "in bursts" in bursts["warnings"]
    assert "itl_contradicts_record" not in itl_against_record({"itl_p50_ms": 6.5, "step_ms": 6.7})
    # an engine idle most of the point: its step while busy, not the window over its steps
    assert "itl_contradicts_record" not in itl_against_record({"itl_p50_ms": 5.0, "step_ms": 60.0,
                                                               "idle_fraction": 0.9})
    table = pd.DataFrame([{"server_point": "baseline", "repeats": 3, "valid": True, "itl_p50_ms": 6.7,
                           "itl_p50_ms_ci95": 0.1},
                          {"server_point": "seqs4", "repeats": 3, "valid": True, "itl_p50_ms": 0.003,
                           "itl_p50_ms_ci95": 0.001, "itl_contradicts_record": True}])
    assert comparisons.compare(table, [])["verdict"].tolist() == [comparisons.CONTRADICTED]
