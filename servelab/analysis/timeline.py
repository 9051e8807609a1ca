"""One point's seconds as a figure (rule timeline: results/EXP/timeline/KEY.png), from its
record of conditions (servelab/serve/point_record.py): the engine's generated tokens per
second, requests running and waiting, KV-cache usage, CPU cores by role, and on a GPU its
SM utilization and clock. The active window (first to last generated token) is shaded;
the held window the row's figures use (`steady_window_start_s`..`_end_s`, seconds from the
first request) is drawn from the window's start, within one /metrics sample of where it
was. The title carries the row's bound and its evidence.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from servelab.analysis import bound  # noqa: E402
from servelab.atomic import atomic_path  # noqa: E402


def series(ticks: list[dict], name: str) -> tuple[list[float], list[float]]:
    found = [(t, m[name]) for t, m in bound.metric_samples(ticks) if name in m]
    return [t for t, _ in found], [v for _, v in found]


def per_second(ts: list[float], values: list[float]) -> tuple[list[float], list[float]]:
    """A counter's increase per second between samples, at each interval's end."""
    pairs = [(t1, (v1 - v0) / (t1 - t0)) for (t0, v0), (t1, v1) in zip(zip(ts, values), zip(ts[1:], values[1:]))
             if t1 > t0]
    return [t for t, _ in pairs], [v for _, v in pairs]


def cpu_series(ticks: list[dict]) -> dict[str, tuple[list[float], list[float]]]:
    out: dict[str, tuple[list[float], list[float]]] = {}
    for before, tick in zip(ticks, ticks[1:]):
        dt = tick["t"] - before["t"]
        if dt <= 0:
            continue
        for role, used in tick["cpu_s"].items():
            xs, ys = out.setdefault(role, ([], []))
            xs.append(tick["t"])
            ys.append(used / dt)
    return out


def draw(record: dict, row: dict, out: str | Path, title: str) -> Path:
    """The figure of one point's record (`row`: its table row, for the held window and bound)."""
    ticks = record["ticks"]
    gpu = any(t.get("gpu") for t in ticks)
    panels = 5 if gpu else 4
    fig, axes = plt.subplots(panels, 1, figsize=(10, 2.3 * panels + 1), sharex=True)
    start, end = bound.active_window(ticks)
    for ax in axes:
        ax.axvspan(start, end, color="0.92", zorder=0)
        held = (row.get("steady_window_start_s"), row.get("steady_window_end_s"))
        if all(isinstance(v, (int, float)) and v == v for v in held):
            ax.axvspan(start + held[0], start + held[1], color="tab:green", alpha=0.12, zorder=0)
        ax.grid(alpha=0.3)
    ax = axes[0]
    ax.plot(*per_second(*series(ticks, "generation_tokens")), color="tab:blue", label="generated")
    ax.plot(*per_second(*series(ticks, "prompt_tokens")), color="tab:gray", alpha=0.7, label="prompt")
    ax.set_ylabel("Tokens/s\n(engine)")
    ax.legend(loc="upper right", fontsize=8)
    ax = axes[1]
    ax.step(*series(ticks, "running"), where="post", label="running")
    ax.step(*series(ticks, "waiting"), where="post", label="waiting", color="tab:red")
    ax.set_ylabel("Requests")
    ax.legend(loc="upper right", fontsize=8)
    ax = axes[2]
    ts, usage = series(ticks, "kv_usage")
    ax.plot(ts, [100 * u for u in usage], color="tab:purple")
    ax.set_ylabel("KV cache\nused (%)")
    ax.set_ylim(0, 105)
    ax = axes[3]
    for role, (xs, ys) in sorted(cpu_series(ticks).items()):
        ax.plot(xs, ys, label=role)
    ax.axhline(1.0, color="0.4", lw=0.8, ls=":")
    ax.set_ylabel("CPU (cores)")
    ax.legend(loc="upper right", fontsize=8)
    if gpu:
        ax = axes[4]
        gts = [t["t"] for t in ticks if t.get("gpu")]
        ax.plot(gts, [t["gpu"]["sm_util_pct"] for t in ticks if t.get("gpu")], color="tab:green",
                label="SM utilization")
        ax.set_ylabel("SM busy (%)")
        ax.set_ylim(0, 105)
        clock = ax.twinx()
        clock.plot(gts, [t["gpu"]["sm_clock_mhz"] for t in ticks if t.get("gpu")], color="tab:orange",
                   label="SM clock")
        clock.set_ylabel("SM clock (MHz)")
    axes[-1].set_xlabel("Seconds since the point began (grey: tokens generated; green: the held window)")
    why = f"bound: {row.get('bound') or 'none'}" + (f" ({row['bound_evidence']})" if row.get("bound_evidence") else "")
    fig.suptitle("\n".join([title, *textwrap.wrap(why, 110)]), fontsize=10)
    fig.tight_layout()
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return Path(out)


def draw_point(exp_dir: str | Path, key: str, out: str | Path) -> Path:
    """The timeline of the point whose store key (or one of whose repeats' keys) is `key`."""
    import pandas as pd

    from servelab.raw_result import read_conditions

    exp_dir = Path(exp_dir)
    record = read_conditions(exp_dir / "store" / key)
    if record is None:
        raise FileNotFoundError(f"{exp_dir / 'store' / key}: no record of its conditions (a failed point, or a "
                                f"store written before servelab kept one)")
    table = pd.read_csv(exp_dir / "metrics.csv")
    match = table[table["point_key"].astype(str).str.split(";").apply(lambda keys: key in keys)]
    row = match.iloc[0].to_dict() if len(match) else {}
    repeat = str(row.get("point_key", key)).split(";").index(key) + 1 if row else 1
    title = f"{exp_dir.name} / {row.get('server_point', '?')}, point {key}" + \
        (f" (repeat {repeat} of {row.get('repeats')})" if row.get("repeats", 1) > 1 else "")
    if row and row.get("repeats", 1) > 1:   # the repeat's own bound, from its own record
        row = {**row, **bound.columns(row, record)}
    return draw(record, row, out, title)
