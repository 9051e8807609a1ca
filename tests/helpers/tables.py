"""A run's table, row by row against the points its configuration names (the end-to-end modules')."""
import math
from pathlib import Path

import pandas as pd

from conftest import load_config
from servelab.config.experiments import server_points


def assert_table_matches_config(workdir: Path, name: str, args: list[str]) -> pd.DataFrame:
    """The experiment's table, row by row against the configured points (config files as in args)."""
    from servelab.config.experiments import client_points

    files = args[args.index("--configfile") + 1:]
    exp = load_config(*files, base=workdir)["experiments"][name]
    table = pd.read_csv(workdir / f"results/{name}/metrics.csv")
    configured = [(sp, knobs) for sp, server in server_points(exp).items() for knobs in client_points(exp, server)]
    assert len(table) == len(configured)
    for (sp, knobs), (_, row) in zip(configured, table.iterrows()):
        assert row["server_point"] == sp
        for knob, value in knobs.items():
            column = f"client.{knob}" if f"client.{knob}" in row else knob   # duration_s: a measured column's name
            assert same_value(value, row[column]), (sp, knob, value, row[column])
    return table


def same_value(configured, got) -> bool:
    """A configured knob value against its cell in the table (CSV turns ints into floats
    where a column has gaps, and `inf` into a float)."""
    if configured == "inf":
        return math.isinf(float(got))
    if isinstance(configured, (int, float)) and not isinstance(configured, bool):
        return float(got) == float(configured)
    return str(got) == str(configured)
