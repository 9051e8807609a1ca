import math
import statistics

import matplotlib.image as mpimg
import pandas as pd
import pytest

from servelab.analysis import figure_notes, plots

SPEC = {"x": "request_rate", "y": ["ttft_p50_ms", "ttft_p99_ms"], "xlabel": "Request rate (req/s)",
        "ylabel": "TTFT (ms)", "title": "TTFT"}


def table(valid=(True, True, True)):
    return pd.DataFrame({
        "request_rate": [1.0, 4.0, math.inf],
        "ttft_p50_ms": [20.0, 25.0, 200.0],
        "ttft_p99_ms": [40.0, 60.0, 250.0],
        "valid": list(valid),
    })


def test_draws_a_png_with_inf_as_the_last_category(tmp_path):
    out = plots.draw(table(), SPEC, tmp_path / "ttft.png")
    image = mpimg.imread(out)
    assert image.shape[0] > 200 and image.shape[1] > 300
    assert plots.categorical_x(table()["request_rate"]) == ["1", "4", "inf"]
    assert plots.categorical_x(pd.Series([2.0, 1.0])) is None


def test_invalid_points_are_marked(tmp_path, monkeypatch):
    seen = {}
    original = plots.plt.Axes.scatter

    def spy(self, *args, **kwargs):
        seen["label"] = kwargs.get("label")
        seen["n"] = len(list(args[0]))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(plots.plt.Axes, "scatter", spy)
    plots.draw(table(valid=(True, False, True)), SPEC, tmp_path / "f.png")
    assert seen == {"label": "failed a validity check", "n": 2}  # one row, two statistics


def test_an_interval_over_repeats_stops_at_zero(tmp_path):
    """Week 1 on 2 CPU cores: one of three repeats' TTFT rose x17, its 95 % interval ran to
    -440 ms and the axis to -500. A latency is never negative: the bar stops at 0, the top
    half keeps its width."""
    wide = table().assign(ttft_p50_ms_ci95=[5.0, 100.0, 10.0], ttft_p99_ms_ci95=[5.0, 30.0, 10.0])
    figure = plots.build(wide, SPEC)
    ax = figure.axes[0]
    assert ax.get_ylim()[0] >= -0.05 * ax.get_ylim()[1]          # the margin matplotlib adds, no more
    bars = [sorted((seg[0][1], seg[1][1])) for c in ax.collections
            for seg in getattr(c, "get_segments", lambda: [])() if len(seg) == 2 and seg[0][0] == seg[1][0]]
    assert min(low for low, _ in bars) == 0.0                     # 25 - 100 stops at 0
    assert [0.0, 125.0] in [[float(a), float(b)] for a, b in bars]   # its upper half stays whole
    plots.plt.close(figure)


def test_unknown_column_is_named(tmp_path):
    with pytest.raises(KeyError, match="ttft_p42_ms"):
        plots.draw(table(), dict(SPEC, y="ttft_p42_ms"), tmp_path / "f.png")
    assert not (tmp_path / "f.png").exists()


def test_empty_table_is_an_error_not_an_empty_figure(tmp_path):
    with pytest.raises(ValueError, match="no rows"):
        plots.draw(table().iloc[0:0], SPEC, tmp_path / "f.png")


def test_scatter_sizes_markers_by_a_column(tmp_path, monkeypatch):
    seen = {}
    original = plots.sns.relplot

    def spy(**kwargs):
        seen.update(kind=kwargs["kind"], size=kwargs["size"], sizes=kwargs.get("sizes"))
        return original(**kwargs)

    monkeypatch.setattr(plots.sns, "relplot", spy)
    df = pd.DataFrame({"output_throughput_tps": [900.0, 1400.0, 2100.0], "gsm8k_em": [0.82, 0.80, 0.74],
                       "weights_gib": [15.0, 8.5, 5.4], "server_point": ["fp16", "fp8", "awq"]})
    spec = {"x": "output_throughput_tps", "y": "gsm8k_em", "size": "weights_gib", "hue": "server_point",
            "kind": "scatter", "xlabel": "Output throughput (tokens/s)", "ylabel": "GSM8K exact match"}
    plots.draw(df, spec, tmp_path / "pareto.png")
    # sized by the column, under its title in words (servelab.analysis.plots.LEGEND_TITLES)
    assert seen == {"kind": "scatter", "size": "weights (GiB)", "sizes": (40, 400)}
    assert mpimg.imread(tmp_path / "pareto.png").shape[0] > 200
    with pytest.raises(KeyError, match="weights_gb"):
        plots.draw(df, dict(spec, size="weights_gb"), tmp_path / "bad.png")


def test_footer_names_the_hardware_and_says_what_cpu_numbers_show(tmp_path, monkeypatch):
    cpu = table().assign(device="cpu", hardware="AMD EPYC", cpu_features="avx2")
    footer = figure_notes.hardware_footer(cpu)
    assert footer.startswith("measured on AMD EPYC [avx2]") and "not which engine or setting wins" in footer
    gpu = table().assign(device="gpu", hardware="NVIDIA H100 80GB HBM3", cpu_features="avx2 avx512f")
    assert "not which" not in figure_notes.hardware_footer(gpu) and "H100" in figure_notes.hardware_footer(gpu)
    assert figure_notes.hardware_footer(table()) == ""
    texts = []
    original = plots.plt.Figure.text
    monkeypatch.setattr(plots.plt.Figure, "text",
                        lambda self, *a, **k: texts.append(a[2]) or original(self, *a, **k))
    plots.draw(cpu, SPEC, tmp_path / "f.png")
    assert footer in texts  # (suptitle is drawn through Figure.text too)


def test_points_that_were_never_measured_are_drawn_with_their_reason(tmp_path, monkeypatch):
    seen = []
    original = plots.plt.Axes.scatter

    def spy(self, *args, **kwargs):
        if args:  # servelab's own markers (seaborn passes x= and y= by keyword)
            seen.append((kwargs.get("label"), len(list(args[0]))))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(plots.plt.Axes, "scatter", spy)
    df = pd.DataFrame({"server_point": ["baseline", "fp8kv", "suffix8"],
                       "output_throughput_tps": [280.0, float("nan"), float("nan")],
                       "valid": [True, False, False],
                       "invalid_reason": ["", "server start-up: NotImplementedError: FP8 KV cache",
                                          "server start-up: ImportError: Arctic Inference"]})
    spec = {"x": "server_point", "y": "output_throughput_tps", "kind": "scatter",
            "xlabel": "Server configuration", "ylabel": "Output throughput (tokens/s)"}
    plots.draw(df, spec, tmp_path / "study.png")
    label, n = seen[-1]
    assert n == 2 and "fp8kv: server start-up: NotImplementedError" in label and "suffix8: " in label
    # every point failed, so the table has no measurement column at all: still a figure
    only_failed = df.iloc[1:].drop(columns=["output_throughput_tps"])
    assert mpimg.imread(plots.draw(only_failed, spec, tmp_path / "none.png")).shape[0] > 200


def test_a_counter_the_engine_did_not_export_is_an_empty_figure_that_says_so(tmp_path, monkeypatch):
    texts = []
    original = plots.plt.Axes.text
    monkeypatch.setattr(plots.plt.Axes, "text", lambda self, *a, **k: texts.append(a[2]) or original(self, *a, **k))
    df = pd.DataFrame({"tpot_p50_ms": [3.0, 4.0], "server_point": ["none", "ngram"], "valid": [True, True]})
    spec = {"x": "spec_acceptance_rate", "y": "tpot_p50_ms", "kind": "scatter", "xlabel": "a", "ylabel": "b"}
    assert plots.draw(df, spec, tmp_path / "f.png").stat().st_size > 0
    assert any("no values to draw" in t for t in texts)
    with pytest.raises(KeyError, match="no_such_column"):     # an unknown column is still an error
        plots.draw(df, dict(spec, x="no_such_column"), tmp_path / "g.png")


def test_a_held_window_figure_where_no_point_held_its_load_is_empty_and_says_why(tmp_path, monkeypatch):
    """Seed 002's seqs128 at 50 req/s in 12 s points on an H200 (2026-12-03): no repeat held its
    load, so the table has no steady_ columns; the figure is drawn and says why."""
    texts = []
    original = plots.plt.Axes.text
    monkeypatch.setattr(plots.plt.Axes, "text", lambda self, *a, **k: texts.append(a[2]) or original(self, *a, **k))
    df = pd.DataFrame({"output_throughput_tps": [7874.0, 7172.0], "server_point": ["async", "sync"],
                       "valid": [True, True], "window": ["whole run", "whole run"]})
    spec = {"x": "server_point", "y": "steady_output_throughput_tps", "kind": "scatter", "xlabel": "a", "ylabel": "b"}
    assert plots.draw(df, spec, tmp_path / "f.png").stat().st_size > 0
    assert any("no point held its load" in t for t in texts)
    with pytest.raises(KeyError, match="steady_no_such"):     # an unknown column is still an error
        plots.draw(df, dict(spec, y="steady_no_such"), tmp_path / "g.png")


def test_the_search_figure_draws_the_frontiers_repeats_and_their_verdict(tmp_path, monkeypatch):
    from servelab.analysis import search_plots
    tried = pd.DataFrame({"round": [0, 1, 1], "server_point": ["a", "b", "c"], "goodput_tps": [300.0, 310.0, 0.0],
                          "limited_by": ["", "", "at max_concurrency=2: p99_itl_ms 40 > 25"]})
    best = {"found": True, "server_point": "b", "goodput_tps": 309.0, "slo": {"p99_itl_ms": 25},
            "confirmation": {"verdict": "not distinguishable", "diff_pct": -2.5, "ci95_pct": [-9.0, 4.0],
                             "configs": {"b": {"goodput_tps": [310.0, 300.0, 317.0], "repeats": 3},
                                         "a": {"goodput_tps": [300.0, 305.0, 295.0], "repeats": 3}}}}
    bars, texts = [], []
    errorbar, text = search_plots.plt.Axes.errorbar, search_plots.plt.Figure.text
    monkeypatch.setattr(search_plots.plt.Axes, "errorbar",
                        lambda self, x, y, **k: bars.append((x[0], y[0], k["yerr"][0][0])) or errorbar(self, x, y, **k))
    monkeypatch.setattr(search_plots.plt.Figure, "text", lambda self, x, y, s, **k: texts.append(s) or text(self, x, y, s, **k))
    out = search_plots.goodput_figure(tried, best, tmp_path / "goodput.png")
    assert out.stat().st_size > 10_000
    # each confirmed configuration beside its launch: the repeats' mean and 95 % half-width
    (b, a) = bars
    assert b[0] == pytest.approx(2.15) and b[1] == pytest.approx(309.0) and b[2] == pytest.approx(4.303 * statistics.stdev([310, 300, 317]) / 3 ** 0.5)
    assert a[0] == pytest.approx(1.15) and a[1] == pytest.approx(300.0)
    assert "frontier: runner-up against the highest (-2.5 % [-9.0, +4.0]): not distinguishable" in texts[0]
    assert "c: at max_concurrency=2" in texts[0]


def test_a_row_without_a_measured_x_is_named_under_the_figure_not_drawn_at_nan():
    """Week 11: a point without speculation has no acceptance rate. The axis stays numeric
    (it ticked "nan" and the rates as categories) and the footer names the row left off."""
    df = pd.DataFrame({"server_point": ["speculative_config=none", "ngram", "ngram"],
                       "spec_acceptance_rate": [math.nan, 0.02, 0.06], "tpot_p50_ms": [11.0, 55.0, 13.0],
                       "valid": [True, True, True]})
    spec = {"x": "spec_acceptance_rate", "y": "tpot_p50_ms", "kind": "scatter", "hue": "server_point",
            "xlabel": "Acceptance rate", "ylabel": "TPOT p50 (ms)"}
    figure = plots.build(df, spec)
    labels = [t.get_text() for ax in figure.axes for t in ax.get_xticklabels()]
    assert "nan" not in labels and len(figure.axes[0].collections[0].get_offsets()) == 2
    assert any(t.get_text().startswith("not drawn (no spec_acceptance_rate): speculative_config=none")
               for t in figure.texts)


def test_a_point_most_repeats_warned_is_ringed_and_one_a_single_repeat_warned_is_dotted(tmp_path, monkeypatch):
    """The whole-GPU path (2026-11-29): every row warned "saturated", two of them in one
    repeat of three; the ring marked every point, so it told nothing apart."""
    seen = []
    original = plots.plt.Axes.scatter

    def spy(self, *args, **kwargs):
        seen.append((kwargs.get("label"), list(args[0]), kwargs.get("linestyles")))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(plots.plt.Axes, "scatter", spy)
    rows = table().assign(repeats=3, warned_repeats=[3, 1, 0],
                          warnings=["repeat 1: a; repeat 2: a; repeat 3: a", "repeat 3: a", ""])
    plots.draw(rows, {**SPEC, "y": "ttft_p50_ms"}, tmp_path / "f.png")
    marks = {label: (list(xs), style) for label, xs, style in seen if label in plots.MARK_LABELS}
    assert marks == {plots.MARK_LABELS[1]: ([0], None), plots.MARK_LABELS[2]: ([1], ":")}
    # a table written before repeats were counted: any warning rings its point
    seen.clear()
    plots.draw(rows.drop(columns="warned_repeats"), {**SPEC, "y": "ttft_p50_ms"}, tmp_path / "g.png")
    assert [xs for label, xs, _ in seen if label == plots.MARK_LABELS[1]] == [[0, 1]]


def test_a_nearly_flat_axis_starts_at_zero_and_a_whole_run_figure_says_its_window():
    import matplotlib.pyplot as plt

    memory = pd.DataFrame({"server_point": ["a", "b", "c"], "peak_gpu_mem_gib": [2.9675, 2.9724, 2.9700],
                           "output_throughput_tps": [100.0, 120.0, 110.0],
                           "steady_output_throughput_tps": [130.0, 150.0, 140.0]})
    spec = {"x": "server_point", "y": "peak_gpu_mem_gib", "xlabel": "Configuration", "ylabel": "Peak memory (GiB)",
            "kind": "scatter"}
    fig = plots.build(memory, spec)
    assert fig.axes[0].get_ylim()[0] == 0   # 0.16 % does not fill the figure
    assert not any("window" in t.get_text() for t in fig.texts)
    plt.close(fig)
    fig = plots.build(memory, {**spec, "y": "output_throughput_tps", "ylabel": "Output throughput (tokens/s)"})
    assert any("y: over the whole run, ramps included; comparisons.csv reads the held window" in t.get_text()
               for t in fig.texts)
    plt.close(fig)
    ttft = plots.build(table(), SPEC)
    assert ttft.axes[0].get_ylim()[0] < 20   # a spread of 20-250 ms keeps its own axis
    plt.close(ttft)
