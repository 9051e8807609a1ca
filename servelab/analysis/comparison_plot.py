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
import pandas as pd  # noqa: E402

from servelab.analysis.comparisons import METHOD, NOT_TWICE  # noqa: E402
from servelab.atomic import atomic_path  # noqa: E402

COLOURS = {"better": "tab:green", "worse": "tab:red", "equivalent": "tab:blue"}
LABELS = {"ttft_p50_ms": "TTFT p50", "ttft_p99_ms": "TTFT p99", "itl_p50_ms": "ITL p50", "itl_p99_ms": "ITL p99",
          "output_throughput_tps": "output throughput", "goodput_rps": "goodput"}


def draw(comparisons: pd.DataFrame, out: str | Path, title: str) -> None:
    metrics = list(dict.fromkeys(comparisons["metric"])) or ["(none)"]
    cols = min(3, len(metrics))
    rows = math.ceil(len(metrics) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows + 0.8), squeeze=False)
    for ax, metric in zip(axes.flat, metrics):
        part = comparisons[comparisons["metric"] == metric]
        names = [f"{c}\n{lp}" for c, lp in zip(part["configuration"], part["load_point"])]
        y = part["diff_pct"].astype(float).fillna(0.0)
        low = (y - part["ci95_low_pct"].astype(float)).fillna(0.0)
        high = (part["ci95_high_pct"].astype(float) - y).fillna(0.0)
        colours = [COLOURS.get(str(v).split()[0], "tab:gray") for v in part["verdict"]]
        ax.bar(range(len(part)), y.to_numpy(), color=colours, yerr=[low.to_numpy(), high.to_numpy()], capsize=3)
        ax.axhline(0, color="black", linewidth=0.8)
        for i, (value, word) in enumerate(zip(y, part["verdict"])):
            ax.annotate("x1" if word == NOT_TWICE else word, (i, value), ha="center", fontsize=7,
                        xytext=(0, 3 if value >= 0 else -10), textcoords="offset points")
        better = part["better_when"].iloc[0] if len(part) else ""
        ax.set_title(f"{LABELS.get(metric, metric)} ({better} is better)", fontsize=10)
        ax.set_ylabel("difference from baseline (%)")
        ax.set_xticks(range(len(part)), names, fontsize=7, rotation=30, ha="right")
    for ax in list(axes.flat)[len(metrics):]:
        ax.axis("off")
    legend = legend_text(comparisons)
    # wrapped to the figure's width: the method's words would run off its edges
    fig.suptitle(title + "\n" + "\n".join(textwrap.wrap(legend, 60 * cols)), fontsize=9)
    fig.tight_layout()
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def legend_text(comparisons) -> str:
    """The figure's legend: the baseline and the method the rows used (paired over
    interleaved rounds, or Welch's: servelab.analysis.comparisons)."""
    baseline = comparisons["baseline"].iloc[0] if len(comparisons) else "?"
    methods = [m for m in dict.fromkeys(comparisons.get("method", [])) if isinstance(m, str)] or [METHOD]
    return (f"vs baseline {baseline}; bars: 95 % interval ({'; '.join(methods)}); "
            f"blue: equivalent within the margin; grey: undecided, or 'x1': measured once")
