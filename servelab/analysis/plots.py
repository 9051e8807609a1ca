"""Figures declared in config, drawn from an experiment's tidy table.

A figure spec: {x, y (a column or a list), xlabel, ylabel, hue?, col?, size?,
kind? (line|scatter), title?, also_from? (other experiments whose rows join)}.
Several y columns are drawn as one line each (e.g. p50 and p99). Categories (names,
not numbers) are points, never joined by a line; a throughput axis starts at zero, and
no axis goes below zero for values that never do; legends are titled in words; where
the table holds repeats, each point carries its 95 % interval (`COLUMN_ci95`).
Points that failed a validity check are drawn with a red cross; points the engine
refused or failed (no measurement) as a black triangle on the x axis, the engine's
reason in a legend under the axes; a point that most of its repeats warned with an
orange ring, one that fewer than half did with a dotted one.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from servelab.analysis.columns import COUNTER_COLUMNS, STEADY_COLUMNS  # noqa: E402
from servelab.analysis.figure_notes import (MARK_LABELS, hardware_footer, marks_and_footer,  # noqa: E402
                                            warned_rows, window_note)
from servelab.atomic import atomic_path  # noqa: E402
from servelab.config.experiments import format_value  # noqa: E402


def check_columns(df: pd.DataFrame, spec: dict, name: str) -> pd.DataFrame:
    """The table with the figure's columns; a measurement column that only failed
    points would have had (none measured) is added empty."""
    ys = spec_ys(spec)
    failed = "valid" in df.columns and not df["valid"].astype(bool).any()
    # a counter the engine did not export (no speculation on this box, SGLang), or a held
    # window's figure where no point held its load, is empty, not unknown
    df = df.assign(**{c: float("nan") for c in [spec["x"], *ys]
                      if c not in df.columns and (failed or c in COUNTER_COLUMNS or c in STEADY_COLUMNS)})
    wanted = [spec["x"], *ys] + [spec[k] for k in ("hue", "col", "size") if spec.get(k)]
    missing = [c for c in wanted if c not in df.columns]
    if missing:
        raise KeyError(f"figure {name!r} names column(s) {missing} that the metrics table lacks; "
                       f"available: {sorted(df.columns)}")
    return df


def long_form(df: pd.DataFrame, spec: dict) -> tuple[pd.DataFrame, str | None]:
    """Melt several y columns into one, keyed by a 'statistic' column, with each one's
    interval in `_ci` where the table has it. Of several, a column with no value at all
    is left out (e.g. the roofline's theory where the GPU has no datasheet entry, or on
    a CPU)."""
    ys = spec["y"] if isinstance(spec["y"], list) else [spec["y"]]
    if len(ys) > 1:
        ys = [y for y in ys if df[y].notna().any()] or ys[:1]
    df = df.assign(**{f"_ci_{y}": df[f"{y}_ci95"] if f"{y}_ci95" in df.columns else float("nan") for y in ys})
    if len(ys) == 1:
        return df.assign(_y=df[ys[0]], _ci=df[f"_ci_{ys[0]}"]), spec.get("hue")
    keep = [c for c in df.columns if c not in ys]
    out = df.melt(id_vars=keep, value_vars=ys, var_name="statistic", value_name="_y")
    out["_ci"] = [row[f"_ci_{row['statistic']}"] for _, row in out.iterrows()]
    return out, spec.get("hue") or "statistic"


def is_nominal(values: pd.Series) -> bool:
    """Names rather than numbers (precisions, configurations): no order to join by a line."""
    numeric = pd.to_numeric(values.map(lambda v: float("inf") if v == "inf" else v), errors="coerce")
    return bool(numeric.isna().any())


# an axis spanning less than this fraction of its top starts at 0
ZOOM_FLOOR = 0.05


def from_zero(spec: dict) -> bool:
    """Throughputs (and other rates) read against zero, never against a cropped axis."""
    ys = spec["y"] if isinstance(spec["y"], list) else [spec["y"]]
    return all("throughput" in y or y.endswith(("_tps", "_rps")) for y in ys)


def categorical_x(values: pd.Series) -> list[str] | None:
    """Order for an x axis that holds inf (e.g. request rate): numeric, inf last."""
    numeric = pd.to_numeric(values, errors="coerce")
    if numeric.notna().all() and not numeric.map(math.isinf).any():
        return None
    return [format_value(v) for v in sorted(values.unique(), key=lambda v: (pd.to_numeric(v, errors="coerce"),))]


# colour-blind-safe (Okabe-Ito's and Tol's darker hues), each at least 3:1 against white
# and against none of the others confusable; a marker per series besides its colour
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#000000", "#AA4499", "#882255", "#332288", "#117733")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
# a numeric knob with at most this many values is drawn on an axis that ticks exactly them
DISCRETE_MAX = 8


def hue_levels(values: pd.Series) -> list[str]:
    """A hue's levels as categories named as in the table, in order: numbers ascending,
    inf last (request rates), names as they come."""
    present = values.dropna().unique()
    numeric = pd.to_numeric(pd.Series(present).replace("inf", float("inf")), errors="coerce")
    if numeric.notna().all():
        return [format_value(v) for _, v in sorted(zip(numeric, present))]
    return [format_value(v) for v in present]


def discrete_ticks(values: pd.Series) -> tuple[list, bool] | None:
    """(the values, powers of two?) of a numeric knob with a few whole values, e.g. tensor
    parallel sizes 1, 2, 4; None for a measurement or a long sweep."""
    numeric = pd.to_numeric(values, errors="coerce").dropna()
    if numeric.empty or len(numeric) != values.notna().sum() or numeric.map(math.isinf).any():
        return None
    unique = sorted(numeric.unique())
    if len(unique) > DISCRETE_MAX or not all(float(v).is_integer() for v in unique):
        return None
    powers = len(unique) > 1 and all(v > 0 and math.log2(v).is_integer() for v in unique) and unique[-1] / unique[0] >= 4
    return [int(v) for v in unique], powers


def wrapped(label: str, width: int) -> str:
    return textwrap.fill(label, width) if label and len(label) > width else label


def draw(df: pd.DataFrame, spec: dict, out: str | Path, name: str = "figure") -> Path:
    """The figure `spec` of the table, written to `out` (PNG)."""
    figure = build(df, spec, name)
    with atomic_path(out) as tmp:
        figure.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    plt.close(figure)
    return Path(out)


# a legend's title (hue, size) in words, with the unit where the column has one
LEGEND_TITLES = {"request_rate": "request rate (req/s)", "max_concurrency": "concurrency (requests)",
                 "weights_gib": "weights (GiB)"}


def legend_title(column: str) -> str:
    return LEGEND_TITLES.get(column, column.replace("_", " "))


def build(df: pd.DataFrame, spec: dict, name: str = "figure"):
    """The matplotlib figure of `spec` drawn from the table (the caller closes it)."""
    if df.empty:
        raise ValueError(f"figure {name!r}: the metrics table has no rows")
    df = check_columns(df, spec, name)
    data, hue = long_form(df, spec)
    x = spec["x"]
    x_known = data[x].notna().any()   # before names replace NaN
    # rows measured without an x of their own (a measured x: a point without speculation
    # has no acceptance rate) cannot sit on the axis: named under the figure, not drawn at "nan"
    no_x = data[x].isna() & data["_y"].notna()
    unplaced = sorted(set(data.loc[no_x, "server_point"].astype(str))) if x_known and "server_point" in data else []
    if unplaced:
        data = data[~no_x]
    drawable = data["_y"].notna().any() and x_known
    order = categorical_x(data[x])
    if order is not None:
        data = data.assign(**{x: data[x].map(format_value)})
    sns.set_theme(style="whitegrid", context="notebook")
    data, plot_kw = relplot_kwargs(data, spec, x, hue, order)
    if drawable:
        grid = sns.relplot(**plot_kw)
        axes = list(grid.axes_dict.items()) if spec.get("col") else [(None, grid.ax)]
    else:
        grid, axes = empty_grid(df, data, order, x_known, held=any(c in STEADY_COLUMNS for c in (x, *spec_ys(spec))))
    # labels fit the canvas: the y label no taller than the axes
    grid.set_axis_labels(wrapped(spec["xlabel"], 60), wrapped(spec["ylabel"], 30))
    if order is None and drawable and (ticks := discrete_ticks(data[x])):
        knob_ticks([ax for _, ax in axes], *ticks)
    for ax_key, ax in axes if drawable else []:
        sub = data if ax_key is None else data[data[spec["col"]] == ax_key]
        mark_measured(ax, sub, sub[x].cat.codes if order is not None else sub[x], spec, order)
    if "valid" in data.columns and (~data["valid"].astype(bool)).any():
        mark_invalid(axes, data[~data["valid"].astype(bool)], spec, x, order)
    grid.figure.suptitle(wrapped(spec.get("title", name), 70), y=1.02)
    marks_and_footer(grid.figure, axes, hardware_footer(df), window_note(df, spec_ys(spec)) +
                     ([f"not drawn (no {x}): {', '.join(unplaced)}"] if unplaced else []))
    return grid.figure


def relplot_kwargs(data: pd.DataFrame, spec: dict, x: str, hue: str | None, order: list | None) -> tuple:
    """(the data as drawn, seaborn's relplot arguments): kind, hue and size legends for what
    varies, titled in words, a categorical x in its given order."""
    # categories are points: a line between two precisions or configurations means nothing
    kind = "scatter" if is_nominal(data[x]) else spec.get("kind", "line")
    # a legend only for what varies
    size = spec.get("size") if spec.get("size") and data[spec["size"]].nunique() > 1 else None
    if hue and data[hue].nunique() < 2:
        hue = None
    plot_kw = dict(data=data, x=x, y="_y", hue=hue, col=spec.get("col"), size=size,
                   kind=kind, height=4, aspect=1.4, facet_kws={"sharey": False})
    if hue:
        # hue levels are categories (a continuous palette over 1, 4, inf draws inf transparent)
        levels = hue_levels(data[hue])
        # the legend's title in words: a column of that name, so the legend is laid out for it
        title = legend_title(hue)
        data = data.assign(**{title: data[hue].map(lambda v: format_value(v) if pd.notna(v) else v)})
        colours = {level: PALETTE[n % len(PALETTE)] for n, level in enumerate(levels)}
        plot_kw.update(data=data, hue=title, hue_order=levels, palette=colours, style=title, style_order=levels,
                       markers={level: MARKERS[n % len(MARKERS)] for n, level in enumerate(levels)})
        if kind == "line":
            plot_kw["dashes"] = False
    else:
        plot_kw["color"] = PALETTE[0]
        if kind == "line":
            plot_kw["marker"] = "o"
    if kind == "scatter" and size:
        plot_kw["sizes"] = (40, 400)
    if size:   # its legend's title in words too
        data = data.assign(**{legend_title(size): data[size]})
        plot_kw.update(data=data, size=legend_title(size))
    if order is not None:
        # categorical axis: points joined in the given order
        data[x] = pd.Categorical(data[x], categories=order, ordered=True)
        data = data.sort_values(x)
        plot_kw.update(data=data, **({"sort": False} if kind == "line" else {}))
    return data, plot_kw


def spec_ys(spec: dict) -> list[str]:
    return spec["y"] if isinstance(spec["y"], list) else [spec["y"]]


def empty_grid(df: pd.DataFrame, data: pd.DataFrame, order: list | None, x_known: bool, held: bool) -> tuple:
    """Nothing measured (every point failed), or nothing of these columns: the axes, the
    failures and why (`held`: a held window's columns, where no point held its load)."""
    grid = sns.FacetGrid(data.iloc[:0], height=4, aspect=1.4)
    if order is not None and x_known:
        grid.ax.set_xticks(range(len(order)), labels=order)
    if "valid" not in df.columns or df["valid"].astype(bool).any():   # measured, yet nothing to draw
        why = ("no point held its load long enough for a held window\n(the rows' `window`: whole run; "
               "their whole-run columns have the figures)" if held else
               "the engine exported none of these\n(e.g. no speculation counters without a speculative config)")
        grid.ax.text(0.5, 0.5, f"no values to draw: {why}",
                     ha="center", va="center", transform=grid.ax.transAxes, color="dimgray")
    return grid, [(None, grid.ax)]


def knob_ticks(axes: list, values: list, powers: bool) -> None:
    """A knob's values, exactly: no in-between values implied."""
    for ax in axes:
        if powers:
            ax.set_xscale("log", base=2)
        ax.set_xticks(values, labels=[str(v) for v in values])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        if not powers and len(values) > 1:
            pad = (values[-1] - values[0]) * 0.08
            ax.set_xlim(values[0] - pad, values[-1] + pad)


def mark_measured(ax, sub: pd.DataFrame, xs, spec: dict, order: list | None) -> None:
    """One facet's intervals over repeats, warned points ringed, its y axis from 0 where it
    should be, long category labels turned."""
    if sub["_ci"].notna().any():
        # a latency or a rate is never below 0: a wide interval over few repeats stops there
        # (week 1's rate-10 TTFT over 3 repeats reached -440 ms, the axis -500)
        below = sub["_ci"].where(sub["_y"] < 0, sub["_ci"].clip(upper=sub["_y"]))
        ax.errorbar(xs, sub["_y"], yerr=[below, sub["_ci"]], fmt="none", ecolor="dimgray", elinewidth=1,
                    capsize=4, zorder=4, label="95 % interval over repeats")
    most, some = warned_rows(sub)
    if most.any():
        ax.scatter(xs[most], sub["_y"][most], s=220, facecolors="none", edgecolors="darkorange",
                   linewidths=1.5, zorder=6, label=MARK_LABELS[1])
    if some.any():
        ax.scatter(xs[some], sub["_y"][some], s=220, facecolors="none", edgecolors="darkorange",
                   linewidths=1.0, linestyles=":", zorder=6, label=MARK_LABELS[2])
    bottom, top = ax.get_ylim()
    if from_zero(spec) or (bottom > 0 and top - bottom < ZOOM_FLOOR * top):
        # a throughput, or an axis so zoomed that noise would look like a difference
        # (peak memory 2.9675-2.9724 GiB filled a figure): from 0
        ax.set_ylim(bottom=0)
    elif sub["_y"].min() >= 0 and ax.get_ylim()[0] < 0:
        # nothing measured is below 0 (an exact match of 0.0 from random weights drew an
        # accuracy axis down to -0.04): stop just under 0, room for a marker's lower half
        # (top > 0: matplotlib widens an all-zero axis to both sides)
        ax.set_ylim(bottom=-0.03 * ax.get_ylim()[1])
    if order is not None and max((len(str(v)) for v in order), default=0) > 6:
        ax.tick_params(axis="x", labelrotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")


def mark_invalid(axes: list, bad: pd.DataFrame, spec: dict, x: str, order: list | None) -> None:
    """Invalid rows: a measured one crossed out, a failed one at the axis' foot with its reason."""
    for ax_key, ax in axes:
        sub = bad if ax_key is None else bad[bad[spec["col"]] == ax_key]
        xs = sub[x].cat.codes if order is not None else sub[x]
        measured = sub["_y"].notna()
        if measured.any():
            ax.scatter(xs[measured], sub["_y"][measured], marker="x", color="red", s=90, zorder=5,
                       label=MARK_LABELS[3])
        if (~measured).any():
            failed = sub[~measured]
            reasons = sorted({textwrap.shorten(f"{sp}: {r}", 150) for sp, r in
                              zip(failed["server_point"], failed["invalid_reason"])})
            ax.scatter(xs[~measured], [ax.get_ylim()[0]] * int((~measured).sum()), marker="v",
                       color="black", s=90, zorder=5, clip_on=False,
                       label="not measured:\n" + "\n".join(textwrap.fill(r, 60) for r in reasons))
