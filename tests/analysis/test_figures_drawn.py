"""Every figure the course declares (config/config.yaml) drawn from the recorded GPU tables
under tests/data/recorded_gpu, and its drawn artists checked (tests/helpers/figure_checks.py):
every series visible and told apart, discrete knobs on discrete axes, labels that fit, the
hardware named once, a legend only for what varies. The CPU default's figures are checked
the same way on its first run (tests/workflow/test_e2e_local.py)."""
import matplotlib.pyplot as plt
import pandas as pd
import pytest
import seaborn as sns

from conftest import REPO, load_config
from helpers import figure_checks
from servelab.analysis import figure_notes, plots

RECORDED = REPO / "tests/data/recorded_gpu"
COURSE = load_config("config/config.yaml", "config/gpu-check.yaml")["experiments"]


def newest_table(experiment: str):
    """The newest recording of an experiment's table (4x H100 first), or None."""
    for run in ("h100x4_20261128g", "h100x4_20261127b", "h100x4_20261127", "h100x2_20261126c", "h100x2_20261126b", "h100x2_20261126"):
        for name in (f"{experiment}.metrics.csv", f"{experiment}.csv"):
            if (RECORDED / run / name).is_file():
                return RECORDED / run / name
    return None


def table_for(experiment: str, spec: dict) -> pd.DataFrame:
    tables = [pd.read_csv(newest_table(experiment))]
    tables += [pd.read_csv(t) for other in spec.get("also_from", []) if (t := newest_table(other))]
    return pd.concat(tables, ignore_index=True)


def columns(spec: dict) -> list[str]:
    ys = spec["y"] if isinstance(spec["y"], list) else [spec["y"]]
    return [spec["x"], *ys] + [spec[k] for k in ("hue", "size", "col") if spec.get(k)]


DECLARED = [(exp, name, spec) for exp, cfg in COURSE.items() for name, spec in (cfg.get("figures") or {}).items()
            if spec and newest_table(exp)]
# a recording made without a part the figure reads (week 12's lm-eval was not staged): named, not drawn
LEFT_OUT = {(e, n): [c for c in columns(s) if c not in table_for(e, s).columns] for e, n, s in DECLARED}
FIGURES = [(e, n, s) for e, n, s in DECLARED if not LEFT_OUT[(e, n)]]


@pytest.mark.parametrize("experiment,name,spec", FIGURES, ids=[f"{e}/{n}" for e, n, _ in FIGURES])
def test_every_declared_figure_reads_at_a_glance(experiment, name, spec):
    df = table_for(experiment, spec)
    figure = plots.build(df, spec, name)
    try:
        problems = figure_checks.check(figure, df, spec)
    finally:
        plt.close(figure)
    print(f"\nchecked {experiment}/{name} from {newest_table(experiment).relative_to(REPO)}")
    assert problems == []


def test_the_checks_list_what_the_figure_checked():
    print("\nfigures checked: " + ", ".join(f"{e}/{n}" for e, n, _ in FIGURES))
    print("left out (the recording lacks their columns): " + ", ".join(
        f"{e}/{n} {missing}" for (e, n), missing in LEFT_OUT.items() if missing))
    assert ("week13", "throughput_vs_tp", COURSE["week13"]["figures"]["throughput_vs_tp"]) in FIGURES
    assert len(FIGURES) >= 15


def test_the_checks_catch_week13s_old_figure():
    """What the 4x H100 run drew: request rates 1, 4, inf on a continuous palette (inf
    transparent, 1 and 4 pale pink), x ticks between the TP sizes, a footer with a GPU a line."""
    df = pd.read_csv(RECORDED / "h100x4_20261127/week13.metrics.csv")
    spec = COURSE["week13"]["figures"]["throughput_vs_tp"]
    grid = sns.relplot(data=df.assign(request_rate=df["request_rate"].astype(float)), x="tensor_parallel_size",
                       y="output_throughput_tps", hue="request_rate", kind="line", marker="o")
    grid.set_axis_labels(spec["xlabel"], spec["ylabel"])
    grid.figure.text(0, 0, "measured on " + df["hardware"].iloc[0])
    try:
        problems = figure_checks.check(grid.figure, df, spec)
    finally:
        plt.close(grid.figure)
    text = "\n".join(problems)
    assert "hue legend shows" in text or "alpha" in text or "contrast" in text, text
    assert "x ticks" in text and "the footer names 'NVIDIA H100 80GB HBM3' 4 times" in text, text


def test_the_hardware_is_said_once():
    assert figure_notes.machine_words("NVIDIA H100 80GB HBM3, 580.159.04; " * 3 + "NVIDIA H100 80GB HBM3, 580.159.04") == \
        "4x NVIDIA H100 80GB HBM3, driver 580.159.04"
    assert figure_notes.machine_words("AMD EPYC 9B14") == "AMD EPYC 9B14"
