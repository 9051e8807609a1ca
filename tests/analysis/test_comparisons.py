"""Is a difference real: each configuration against the baseline with Welch's t on the
repeats, a verdict, and the smallest difference the spread could have shown."""
import math
import statistics

import pandas as pd
import pytest

from servelab.analysis import comparison_plot, comparisons
from servelab.stats import mean_ci95, t95
from servelab.config.experiments import compares_configurations, load_knobs


def row(point: str, rate, ttft: list[float], tps: list[float], valid=True) -> dict:
    """A metrics.csv row as the repeats aggregator writes it (mean and 95 % half-width)."""
    out = {"server_point": point, "request_rate": rate, "repeats": len(ttft), "valid": valid}
    for name, values in (("ttft_p50_ms", ttft), ("output_throughput_tps", tps)):
        out[name], half = mean_ci95(values)
        if half is not None:
            out[f"{name}_ci95"] = half
    return out


def welch_by_hand(a: list[float], b: list[float]) -> tuple[float, float]:
    """The same interval from the raw repeats (the test's own arithmetic)."""
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    dof = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    diff = statistics.fmean(b) - statistics.fmean(a)
    return diff, t95(int(dof)) * math.sqrt(va + vb)


def test_a_clear_difference_is_better_or_worse_by_the_metrics_direction():
    base_ttft, fast_ttft = [100.0, 102.0, 98.0], [80.0, 81.0, 79.5]
    base_tps, fast_tps = [500.0, 505.0, 495.0], [499.0, 510.0, 492.0]
    table = pd.DataFrame([row("eager", 4, base_ttft, base_tps), row("graphs", 4, fast_ttft, fast_tps)])
    out = comparisons.compare(table, ["request_rate"]).set_index("metric")
    ttft = out.loc["ttft_p50_ms"]
    assert ttft["configuration"] == "graphs" and ttft["baseline"] == "eager" and ttft["load_point"] == "request_rate=4"
    diff, half = welch_by_hand(base_ttft, fast_ttft)
    mean_a = statistics.fmean(base_ttft)
    assert ttft["diff_pct"] == pytest.approx(100 * diff / mean_a)
    assert ttft["ci95_low_pct"] == pytest.approx(100 * (diff - half) / mean_a, rel=1e-6)
    assert ttft["detectable_pct"] == pytest.approx(100 * half / mean_a, rel=1e-6)
    assert ttft["verdict"] == "better"                    # lower TTFT, interval below zero
    # within noise, and the 90 % interval inside +-5 %: equal within the margin (TOST)
    assert out.loc["output_throughput_tps", "verdict"] == "equivalent within +-5 %"
    assert ttft["method"].startswith("Welch's t")
    # the other way round, the same difference is worse
    swapped = comparisons.compare(table, ["request_rate"], baseline="graphs").set_index("metric")
    assert swapped.loc["ttft_p50_ms", "verdict"] == "worse" and swapped.loc["ttft_p50_ms", "configuration"] == "eager"


def test_one_repeat_is_never_a_verdict_and_a_failed_point_is_not_compared():
    table = pd.DataFrame([row("a", 1, [100.0], [10.0]), row("b", 1, [50.0], [20.0]),
                          row("a", 8, [100.0, 101.0], [10.0, 10.1]), row("b", 8, [50.0, 51.0], [20.0, 20.5], valid=False)])
    out = comparisons.compare(table, ["request_rate"])
    once = out[out["load_point"] == "request_rate=1"]
    assert set(once["verdict"]) == {"not measured twice"} and once["ci95_low_pct"].isna().all()
    assert once.set_index("metric").loc["ttft_p50_ms", "diff_pct"] == pytest.approx(-50.0)
    assert set(out[out["load_point"] == "request_rate=8"]["verdict"]) == {"not comparable: a point is not valid"}


def test_a_baseline_that_is_no_configuration_is_named_and_one_configuration_compares_nothing():
    table = pd.DataFrame([row("a", 1, [1.0], [1.0]), row("b", 1, [1.0], [1.0])])
    with pytest.raises(ValueError, match="baseline 'c' is not a configuration.*\\['a', 'b'\\]"):
        comparisons.compare(table, ["request_rate"], baseline="c")
    assert comparisons.compare(table[table["server_point"] == "a"], ["request_rate"]).empty


def test_the_figure_is_drawn_with_its_verdicts(tmp_path):
    table = pd.DataFrame([row("eager", 4, [100.0, 102.0, 98.0], [500.0, 505.0, 495.0]),
                          row("graphs", 4, [80.0, 81.0, 79.5], [499.0, 510.0, 492.0])])
    out = tmp_path / "comparisons.png"
    comparison_plot.draw(comparisons.compare(table, ["request_rate"]), out, "Week 10")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_which_experiments_compare_and_what_makes_their_load_points(course_config):
    exps = course_config["experiments"]
    assert compares_configurations(exps["week06"]) and not compares_configurations(exps["week01"])
    assert not compares_configurations(exps["week08_search"]) if "week08_search" in exps else True
    assert load_knobs(exps["week16"]) == ["random_input_len"]
    assert load_knobs(exps["week13"]) == ["request_rate"]       # tensor_parallel_size is the server's


def test_equal_and_unknown_read_apart():
    """"Not distinguishable" lumped two answers: equal within a margin (the two one-sided
    tests at 95 %: the 90 % interval inside +-margin) and cannot tell (wider than that)."""
    base = [500.0, 505.0, 495.0]
    tight = pd.DataFrame([row("a", 4, [1.0] * 3, base), row("b", 4, [1.0] * 3, [502.0, 507.0, 498.0])])
    wide = pd.DataFrame([row("a", 4, [1.0] * 3, base), row("b", 4, [1.0] * 3, [400.0, 620.0, 500.0])])
    verdict = {name: comparisons.compare(t, ["request_rate"]).set_index("metric").loc["output_throughput_tps"]
               for name, t in (("tight", tight), ("wide", wide))}
    assert verdict["tight"]["verdict"] == "equivalent within +-5 %"
    assert -5 < verdict["tight"]["ci90_low_pct"] < verdict["tight"]["ci90_high_pct"] < 5
    assert verdict["wide"]["verdict"] == comparisons.UNDECIDED
    assert verdict["wide"]["ci95_low_pct"] < 0 < verdict["wide"]["ci95_high_pct"]
    # the margin is the experiment's: at 0.5 % the tight pair is no longer shown equal
    narrow = comparisons.compare(tight, ["request_rate"], margin=0.005).set_index("metric")
    assert narrow.loc["output_throughput_tps", "verdict"] == comparisons.UNDECIDED
    # the 90 % interval lies inside the 95 % one
    t = verdict["tight"]
    assert t["ci95_low_pct"] < t["ci90_low_pct"] < t["ci90_high_pct"] < t["ci95_high_pct"]


def test_the_held_window_is_read_only_where_every_repeat_held_it():
    """A point whose held window has no interval (a repeat did not hold its load) is compared
    over the whole run, not called "not measured twice" with three repeats on each side."""
    base, other = row("baseline", 4, [100.0, 102.0, 98.0], [500.0, 505.0, 495.0]), \
        row("seqs4", 4, [150.0, 151.0, 149.0], [400.0, 402.0, 398.0])
    for r in (base, other):
        r.update(window="steady", steady_output_throughput_tps=r["output_throughput_tps"])
    other["steady_output_throughput_tps_ci95"] = 4.0   # the baseline's held window lacks one
    got = comparisons.compare(pd.DataFrame([base, other]), ["request_rate"]).set_index("metric")
    assert got.loc["output_throughput_tps", "window"] == "whole run"
    assert got.loc["output_throughput_tps", "verdict"] == "worse"
    base["steady_output_throughput_tps_ci95"] = 5.0
    again = comparisons.compare(pd.DataFrame([base, other]), ["request_rate"]).set_index("metric")
    assert again.loc["output_throughput_tps", "window"] == "steady"


def test_the_figure_draws_no_empty_panel_no_zero_width_interval_and_keeps_extremes_readable():
    import matplotlib.pyplot as plt

    none = comparison_plot.figure(comparisons.compare(pd.DataFrame([row("a", 1, [1.0], [1.0])]), []), "Week 4")
    assert not any(ax.get_visible() and ax.axison for ax in none.axes)
    assert any("No comparison" in t.get_text() for ax in none.axes for t in ax.texts)
    plt.close(none)
    table = pd.DataFrame([row("baseline", 4, [100.0, 102.0, 98.0], [500.0, 505.0, 495.0]),
                          row("slow", 4, [150000.0, 152000.0, 149000.0], [400.0, 402.0, 398.0]),
                          row("once", 4, [100.0], [510.0])])
    fig = comparison_plot.figure(comparisons.compare(table, ["request_rate"]), "Week 10")
    ttft, tps = fig.axes[0], fig.axes[1]
    assert ttft.get_yscale() == "symlog" and tps.get_yscale() == "linear"   # +150,000 % beside -20 %
    # one interval drawn (slow's); the point measured once gets none, not a zero-width bar
    caps = [c for c in tps.containers if type(c).__name__ == "ErrorbarContainer"]
    assert len(caps) == 1 and len(caps[0].lines[2][0].get_segments()) == 1
    assert "whole run" in tps.get_title() and "each configuration against 'baseline'" in fig._suptitle.get_text()
    # one load point in the panel: named once in its title, each bar by its configuration alone
    assert [t.get_text() for t in tps.get_xticklabels()] == ["slow", "once"]
    assert "at request_rate=4" in tps.get_title().replace("\n", " ")
    plt.close(fig)


def test_a_symlog_panel_shows_every_bar_and_one_configuration_is_named_once():
    """week11 in the default: one configuration at two loads, ITL p99 -84 % beside an interval
    up to +5e8 %: the bar below zero was cut off, and the long name wrapped under each bar."""
    import matplotlib.pyplot as plt

    compared = pd.DataFrame([
        {"metric": "itl_p99_ms", "configuration": "speculative_config=method=ngram", "load_point": load,
         "diff_pct": diff, "ci95_low_pct": low, "ci95_high_pct": high, "verdict": "undecided",
         "better_when": "lower", "window": "whole run", "baseline": "none", "method": "paired"}
        for load, diff, low, high in (("request_rate=4.0", 623.0, -64.9, 14785.0),
                                      ("request_rate=inf", -84.3, -100.0, 5.35e8))])
    fig = comparison_plot.figure(compared, "Week 11")
    ax = fig.axes[0]
    assert ax.get_yscale() == "symlog" and ax.get_ylim()[0] < -100 and ax.get_ylim()[1] >= 5.35e8
    assert [t.get_text() for t in ax.get_xticklabels()] == ["request_rate=4.0", "request_rate=inf"]
    assert "speculative_config=method=ngram:" in fig._suptitle.get_text()
    plt.close(fig)
