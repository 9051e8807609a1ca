"""The figures of a search (servelab.search): goodput of each configuration in the order
tried, with the best so far; the SLO frontier (each SLO latency against the load, per
configuration, the limit drawn); the Pareto front of output tokens/s per user against
tokens/s per GPU over every measured point. Points that met the whole SLO are filled;
configurations that met it at no load, and why, are listed under the axes.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from servelab import stats  # noqa: E402
from servelab.analysis import checks  # noqa: E402
from servelab.analysis.figure_notes import hardware_footer  # noqa: E402
from servelab.atomic import atomic_path  # noqa: E402
from servelab.config.experiments import gpus_needed  # noqa: E402
from servelab.search import slo as slo_check  # noqa: E402


def slo_text(slo: dict) -> str:
    return ", ".join(f"{k} ≤ {v:g}" for k, v in slo.items())


def column(slo_key: str) -> str:
    """The metrics table's column of an SLO statistic (p99_ttft_ms -> ttft_p99_ms)."""
    stat, latency, _ = slo_key.split("_")
    return f"{latency}_{'p50' if stat == 'median' else stat}_ms"


def met_slo(df: pd.DataFrame, slo: dict) -> pd.Series:
    """Whether each measured row met the whole SLO (a failed point met none) at a load it
    held (servelab.search.slo.not_held, from the row's arrival rate, E2E and TTFT trend)."""
    def number(row, name):
        value = row.get(name)
        return None if value is None or pd.isna(value) else float(value)

    def one(row):
        if not row.get("valid") and pd.isna(row.get("output_throughput_tps")):
            return False
        bench = {k: row.get(column(k)) for k in slo if k != slo_check.MAX_FAILED}
        bench["failed"] = row.get("failed") or 0
        if not slo_check.judge(slo, {k: v for k, v in bench.items() if pd.notna(v)})[0]:
            return False
        return slo_check.not_held(number(row, "request_rate"), *checks.arrivals(row), number(row, "e2el_p50_ms"),
                                  trend=number(row, "ttft_trend")) is None
    return df.apply(one, axis=1) if len(df) else pd.Series(dtype=bool)


def save(fig, out: str | Path, footer: str) -> Path:
    if footer:
        fig.text(0.01, 0.005, footer, fontsize="x-small", va="bottom", wrap=True)
    fig.tight_layout(rect=(0, 0.08 if footer else 0, 1, 1))
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
    return Path(out)


def goodput_figure(tried: pd.DataFrame, best: dict, out: str | Path, footer: str = "") -> Path:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    order = range(1, len(tried) + 1)
    met = tried["goodput_tps"] > 0
    for rnd, rows in tried.assign(n=list(order))[met].groupby("round"):
        ax.scatter(rows["n"], rows["goodput_tps"], label=f"round {rnd}", zorder=3)
    ax.step(list(order), tried["goodput_tps"].cummax(), where="post", color="black", lw=1, label="best so far")
    if (~met).any():
        ax.scatter([n for n, m in zip(order, met) if not m], [0] * int((~met).sum()), marker="v", color="red",
                   zorder=3, label="met the SLO at no load")
    notes = []
    if confirmed := best.get("confirmation"):   # the frontier's repeats: mean and 95 % interval
        for i, (sp, c) in enumerate(confirmed["configs"].items()):
            mean, half = stats.mean_ci95(c["goodput_tps"])
            ax.errorbar([list(tried["server_point"]).index(sp) + 1.15], [mean], yerr=[[half or 0], [half or 0]],
                        fmt="D", color="black", capsize=4, zorder=4,
                        label=f"frontier, {c['repeats']} repeats (mean, 95 % CI)" if i == 0 else None)
        gap = (f" ({confirmed['diff_pct']:+.1f} % [{confirmed['ci95_pct'][0]:+.1f}, {confirmed['ci95_pct'][1]:+.1f}])"
               if "ci95_pct" in confirmed else "")
        notes.append(f"frontier: runner-up against the highest{gap}: {confirmed['verdict']} (Welch's t)")
    if best.get("found"):
        n = list(tried["server_point"]).index(best["server_point"]) + 1
        right_half = n > (len(tried) + 1) / 2  # label towards the middle, inside the axes
        ax.annotate(best["server_point"], (n, best["goodput_tps"]), textcoords="offset points",
                    xytext=(-6 if right_half else 6, -24), ha="right" if right_half else "left",
                    fontsize="small", bbox={"fc": "white", "ec": "none", "alpha": 0.8})
    ax.set_xlabel("Configuration tried (launch order)")
    ax.set_ylabel("Goodput (output tokens/s at the\nhighest load meeting the SLO)")
    ax.set_ylim(bottom=0)
    ax.set_xticks(list(order))
    ax.set_title(f"Search by {best.get('strategy', 'coordinate')}: {len(tried)} launches\nSLO: {slo_text(best['slo'])}",
                 fontsize="medium")
    notes += [f"{sp}: {why}" for sp, why, g in zip(tried["server_point"], tried["limited_by"], tried["goodput_tps"])
              if g <= 0]
    ax.legend(fontsize="small", loc="lower right")
    text = "\n".join(textwrap.shorten(n, 140) for n in notes[:6])
    return save(fig, out, "\n".join(t for t in (text, footer) if t))


def frontier_figure(df: pd.DataFrame, search: dict, out: str | Path, footer: str = "") -> Path:
    slo, knob = search["slo"], search["load"]["knob"]
    limits = [k for k in slo if k != slo_check.MAX_FAILED]
    fig, axes = plt.subplots(1, len(limits), figsize=(5.5 * len(limits), 4.5), squeeze=False)
    met = met_slo(df, slo)
    for ax, key in zip(axes[0], limits):
        for sp, rows in df.assign(_met=met).sort_values(knob).groupby("server_point", sort=False):
            rows = rows[rows[column(key)].notna()]
            line, = ax.plot(rows[knob], rows[column(key)], lw=1, label=sp)
            ax.scatter(rows[knob], rows[column(key)], color=line.get_color(), zorder=3,
                       facecolors=[line.get_color() if m else "none" for m in rows["_met"]])
        ax.axhline(slo[key], color="red", ls="--", lw=1, label=f"SLO {key} ≤ {slo[key]:g} ms")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))  # labels within one decade too
        for axis in (ax.xaxis, ax.yaxis):  # plain numbers (2, 500, 0.01), not powers
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("Concurrent requests" if knob == "max_concurrency" else "Request rate (req/s)")
        ax.set_ylabel(f"{key.replace('_ms', '').replace('_', ' ')} (ms)")
    # One legend: the configurations (same on every axis) and each axis's own SLO line.
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes[0][1:]:
        h, lab = ax.get_legend_handles_labels()
        handles.append(h[-1])
        labels.append(lab[-1])
    axes[0][-1].legend(handles, labels, fontsize="x-small", loc="upper left", bbox_to_anchor=(1.02, 1))
    fig.suptitle("SLO frontier: each configuration's load bisection (filled: met the whole SLO)",
                 fontsize="medium")
    return save(fig, out, footer)


def pareto_front(points: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """The points no other point beats on both x and y (higher is better on each)."""
    front = [i for i, p in points.iterrows()
             if not ((points[x] >= p[x]) & (points[y] >= p[y]) & ((points[x] > p[x]) | (points[y] > p[y]))).any()]
    return points.loc[front].sort_values(x)


def pareto_figure(df: pd.DataFrame, search: dict, out: str | Path, footer: str = "") -> Path:
    measured = df[df["output_throughput_tps"].notna() & df["tpot_mean_ms"].gt(0)].copy()
    measured["per_user"] = 1000.0 / measured["tpot_mean_ms"]
    measured["per_gpu"] = measured["output_throughput_tps"] / [gpus_needed(r) for r in measured.to_dict("records")]
    measured["_met"] = met_slo(measured, search["slo"])
    fig, ax = plt.subplots(figsize=(8, 5))
    groups = list(measured.groupby("server_point", sort=False))
    colours = plt.get_cmap("tab20" if len(groups) > 10 else "tab10").colors  # a grid can pass ten
    for (sp, rows), colour in zip(groups, colours * (len(groups) // len(colours) + 1)):
        ax.scatter(rows["per_user"], rows["per_gpu"], label=sp, zorder=3, color=colour,
                   marker="o", alpha=0.9, edgecolors="black", linewidths=[1.2 if m else 0 for m in rows["_met"]])
    if len(measured):
        front = pareto_front(measured, "per_user", "per_gpu")
        ax.plot(front["per_user"], front["per_gpu"], color="black", lw=1, ls="--", label="Pareto front")
    ax.set_xlabel("Output tokens/s per user (1000 / mean TPOT)")
    device = "GPU" if "device" not in measured.columns or (measured["device"] == "gpu").any() else "device (CPU)"
    ax.set_ylabel(f"Output tokens/s per {device}")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_title("Every measured point of the search (outlined: met the SLO)", fontsize="medium")
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.02, 1))
    return save(fig, out, footer)


def draw_all(metrics_csv: str | Path, tried_csv: str | Path, best: dict, search: dict,
             *, outs: dict[str, str | Path]) -> None:
    df, tried = pd.read_csv(metrics_csv), pd.read_csv(tried_csv)
    footer = hardware_footer(df)
    goodput_figure(tried, best, outs["goodput"], footer)
    frontier_figure(df, search, outs["frontier"], footer)
    pareto_figure(df, search, outs["pareto"], footer)
