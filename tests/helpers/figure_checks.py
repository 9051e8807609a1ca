"""What a figure must show to read at a glance, checked on its drawn artists (not pixels):
every hue series visible (opaque, at least 3:1 against the background, a colour and a
marker of its own), a discrete knob's axis ticking exactly its values, labels that fit,
the hardware said once, a legend only for what varies. What a figure must show is read
off the table here, not asked of the plotting code it checks."""
import math

import matplotlib.colors as mcolors
import numpy as np
import pandas as pd

from servelab.analysis import plots


def luminance(colour) -> float:
    def channel(c):
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(c) for c in mcolors.to_rgb(colour))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a, b) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def as_shown(value) -> str:
    """How a table's value reads in a legend: true/false, whole numbers without '.0', inf."""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value)).lower()
    if isinstance(value, (int, float, np.integer, np.floating)):
        value = float(value)
        return "inf" if math.isinf(value) else str(int(value)) if value.is_integer() else str(value)
    return str(value)


def knob_ticks(values: pd.Series) -> list[float] | None:
    """The ticks a discrete knob's axis must show, exactly its values: a numeric column of
    at most 8 whole, finite values (tensor parallel sizes, batch sizes); None otherwise."""
    present = values.dropna()
    numeric = pd.to_numeric(present, errors="coerce")
    if present.empty or numeric.isna().any() or numeric.map(math.isinf).any():
        return None
    unique = sorted(numeric.unique())
    return unique if len(unique) <= 8 and all(float(v).is_integer() for v in unique) else None


def series_handles(figure, levels: set[str]) -> dict:
    """{level: legend handle} of the hue legend seaborn drew for the figure."""
    legend = getattr(figure, "legends", [])
    handles = {}
    for leg in legend:
        for handle, text in zip(leg.legend_handles, leg.get_texts()):
            if text.get_text() in levels:
                handles[text.get_text()] = handle
    return handles


def check(figure, df: pd.DataFrame, spec: dict) -> list[str]:
    """Problems of a built figure (servelab.analysis.plots.build) of table `df`; [] if none."""
    problems = []
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    background = figure.get_facecolor()
    hue = spec.get("hue") or (None if not isinstance(spec["y"], list) else "statistic")
    # a legend's titles in words: seaborn titles a hue or size section with the column's name
    legend_words = {t.get_text() for leg in figure.legends for t in [leg.get_title(), *leg.get_texts()]}
    raw = sorted(c for c in (spec.get("hue"), spec.get("size")) if c and "_" in c and c in legend_words)
    if raw:
        problems.append(f"a legend titled with the column's name: {raw}")
    placed = df[df[spec["x"]].notna()]   # a row with no x is named under the figure, not drawn
    if hue and hue != "statistic" and placed[hue].nunique() > 1:
        levels = {as_shown(v) for v in placed[hue].dropna().unique()}
        handles = series_handles(figure, levels)
        if set(handles) != levels:
            problems.append(f"hue legend shows {sorted(handles)} of {sorted(levels)}")
        colours, markers = [], []
        for level, handle in handles.items():
            colour = handle.get_color() if hasattr(handle, "get_color") else handle.get_facecolor()[0]
            alpha = mcolors.to_rgba(colour)[3] if handle.get_alpha() is None else handle.get_alpha()
            if alpha < 1:
                problems.append(f"series {level} drawn with alpha {alpha}")
            if contrast(colour, background) < 3:
                problems.append(f"series {level} has contrast {contrast(colour, background):.1f}:1 on the background")
            colours.append(mcolors.to_hex(colour))
            markers.append(handle.get_marker() if hasattr(handle, "get_marker") else str(handle.get_paths()[0]))
        if len(set(colours)) != len(colours):
            problems.append(f"series share colours: {colours}")
        if len(set(markers)) != len(markers):
            problems.append(f"series share markers: {markers}")
    values = knob_ticks(df[spec["x"]])
    for ax in figure.axes:
        if not ax.get_xlabel():
            continue   # a legend's or colour bar's axes
        if values and ax.lines:
            shown = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
            if not all(math.isclose(a, b) for a, b in zip(shown, values)) or len(shown) != len(values):
                problems.append(f"x ticks {list(shown)} for the knob's values {values}")
            if len(ax.xaxis.get_minorticklocs()):
                problems.append("minor ticks between the knob's values")
        label = ax.yaxis.get_label().get_window_extent(renderer)
        if label.height > 1.05 * ax.get_window_extent(renderer).height:
            problems.append(f"y label {ax.get_ylabel()!r} is taller than its axes")
    footer = [t.get_text() for t in figure.texts if t.get_text().startswith("measured on")]
    for text in footer:
        for machine in set(df.get("hardware", pd.Series(dtype=str)).dropna()):
            for gpu in {e.rsplit(",", 1)[0].strip() for e in str(machine).split(";")}:
                if text.count(gpu) > 1:
                    problems.append(f"the footer names {gpu!r} {text.count(gpu)} times")
    for ax in figure.axes:
        ticks = [t for t in ax.get_yticks() if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
        if ax.get_label() != "<colorbar>" and ax.lines + ax.collections and ticks and min(ticks) < 0:
            problems.append(f"a y axis ticked below 0 ({min(ticks)}) for values that are never negative")
    if spec.get("size") and df[spec["size"]].nunique() < 2:
        for leg in figure.legends:
            if any(t.get_text() in (spec["size"], plots.legend_title(spec["size"])) for t in leg.get_texts()):
                problems.append(f"a size legend for {spec['size']}, which does not vary")
    return problems
