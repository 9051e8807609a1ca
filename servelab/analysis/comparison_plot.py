"""The figure of an experiment's comparisons (servelab.analysis.comparisons): one panel per
headline metric, a bar per configuration and load point with the difference from the
baseline in %, its 95 % interval, and the verdict written on it."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from servelab.analysis.comparisons import METHOD, NOT_TWICE  # noqa: E402
from servelab.atomic import atomic_path  # noqa: E402

COLOURS = {"better": "tab:green", "worse": "tab:red", "equivalent": "tab:blue"}
LABELS = {"ttft_p50_ms": "TTFT p50", "ttft_p99_ms": "TTFT p99", "itl_p50_ms": "ITL p50", "itl_p99_ms": "ITL p99",
          "output_throughput_tps": "output throughput", "goodput_rps": "goodput"}


def draw(comparisons: pd.DataFrame, out: str | Path, title: str) -> None:
    fig = figure(comparisons, title)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def figure(comparisons: pd.DataFrame, title: str):
    if comparisons.empty:   # one configuration, or none sharing a load point with the baseline
        return figure_of_none(title)
    metrics = list(dict.fromkeys(comparisons["metric"]))
    cols = min(3, len(metrics))
    rows = math.ceil(len(metrics) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows + 0.8), squeeze=False)
    for ax, metric in zip(axes.flat, metrics):
        part = comparisons[comparisons["metric"] == metric]
        # what every bar of the panel shares is said once (its title, or the figure's), not under each bar
        single = part["load_point"].nunique() == 1
        one_config = part["configuration"].nunique() == 1 and not single
        names = ["\n".join(textwrap.wrap(lp if one_config else c if single else f"{c} {lp}", 22))
                 for c, lp in zip(part["configuration"], part["load_point"])]
        at = f" at {part['load_point'].iloc[0]}" if single and part["load_point"].iloc[0] != "the one load" else ""
        y = part["diff_pct"].astype(float).fillna(0.0).to_numpy()
        low, high = part["ci95_low_pct"].astype(float).to_numpy(), part["ci95_high_pct"].astype(float).to_numpy()
        colours = [COLOURS.get(str(v).split()[0], "tab:gray") for v in part["verdict"]]
        ax.bar(range(len(part)), y, color=colours)
        # an interval only where there is one: a point measured once gets none (not a zero-width bar)
        has = ~(np.isnan(low) | np.isnan(high))
        if has.any():
            ax.errorbar(np.arange(len(part))[has], y[has], yerr=[(y - low)[has], (high - y)[has]], fmt="none",
                        ecolor="black", capsize=3, linewidth=1)
        ax.axhline(0, color="black", linewidth=0.8)
        for i, (value, word) in enumerate(zip(y, part["verdict"])):
            ax.annotate("x1" if word == NOT_TWICE else word, (i, value), ha="center", fontsize=7,
                        xytext=(0, 3 if value >= 0 else -10), textcoords="offset points")
        extent = np.nanmax(np.abs(np.concatenate([y, low[has], high[has]]))) if len(y) else 0
        if extent > 1000:   # a +1e5 % TTFT beside -3 % throughput: linear near 0, log beyond +-100 %
            ax.set_yscale("symlog", linthresh=100)
            # every bar and interval inside the axes, zero included (autoscaling cut a -84 % bar off)
            seen = np.concatenate([y, low[has], high[has], [0.0]])
            ax.set_ylim(symlog_limit(float(np.nanmin(seen)), -1), symlog_limit(float(np.nanmax(seen)), 1))
        better = part["better_when"].iloc[0]
        window = part["window"].iloc[0] if "window" in part else "whole run"
        ax.set_title("\n".join(textwrap.wrap(f"{LABELS.get(metric, metric)}{at}, {window} ({better} is better)", 48)),
                     fontsize=10)
        ax.set_ylabel("difference from the baseline (%)" + (", symlog" if extent > 1000 else ""))
        ax.set_xticks(range(len(part)), names, fontsize=7, rotation=30, ha="right")
    for ax in list(axes.flat)[len(metrics):]:
        ax.axis("off")
    legend = legend_text(comparisons)
    if comparisons["configuration"].nunique() == 1 < comparisons["load_point"].nunique():   # named under no bar
        legend = f"{comparisons['configuration'].iloc[0]}: " + legend
    # wrapped to the figure's width: the method's words would run off its edges
    fig.suptitle(title + "\n" + "\n".join(textwrap.wrap(legend, 60 * cols)), fontsize=9)
    fig.tight_layout()
    return fig


def symlog_limit(value: float, side: int) -> float:
    """An axis limit just past `value` on its `side` (-1 below, 1 above) of a symlog axis that
    is linear within +-100 %: twice it beyond, 25 points past it within."""
    return 2 * value if value * side > 100 else value + 25 * side


def figure_of_none(title: str):
    """No comparison to draw: a figure that says so, not an empty panel."""
    fig, ax = plt.subplots(figsize=(6, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, "No comparison: one configuration, or none measured at the baseline's load points\n"
                      "(comparisons.csv holds only its header)", ha="center", va="center", fontsize=9)
    fig.suptitle(title, fontsize=10)
    return fig


def legend_text(comparisons) -> str:
    """The figure's legend: the baseline and the method the rows used (paired over
    interleaved rounds, or Welch's: servelab.analysis.comparisons)."""
    baseline = comparisons["baseline"].iloc[0] if len(comparisons) else "?"
    methods = [m for m in dict.fromkeys(comparisons.get("method", [])) if isinstance(m, str)] or [METHOD]
    return (f"each configuration against {baseline!r}; bars: 95 % interval ({'; '.join(methods)}); "
            f"blue: equivalent within the margin; grey: undecided, or 'x1': measured once")
