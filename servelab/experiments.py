"""Experiments are data: expand an experiment's grids into server and client points.

An experiment is engine + model + workload + a grid of server knobs + a grid of
client (load) knobs. Each server point becomes one Snakemake job; its client
points are measured inside that job against one server.
"""

from __future__ import annotations

import itertools
import math


def grid_points(grid: dict) -> list[dict]:
    """Cartesian product of a {knob: [values]} grid, in config order."""
    if not grid:
        return [{}]
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


def format_value(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def point_id(knobs: dict) -> str:
    """Readable, path-safe name of a point, e.g. `max_num_seqs=16+block_size=8`."""
    if not knobs:
        return "base"
    return "+".join(f"{k}={format_value(v)}" for k, v in knobs.items())


def server_points(exp: dict) -> dict[str, dict]:
    """{server point id: full server knobs (fixed args overlaid by the grid point)}."""
    server = exp.get("server", {})
    return {
        point_id(p): {**server.get("args", {}), **p}
        for p in grid_points(server.get("grid", {}))
    }


def client_points(exp: dict) -> list[dict]:
    """Full client knobs of every load point (fixed args overlaid by the grid point)."""
    client = exp.get("client", {})
    return [{**client.get("args", {}), **p} for p in grid_points(client.get("grid", {}))]


def swept_knobs(exp: dict) -> list[str]:
    """The knobs that vary inside an experiment: the columns a figure can use."""
    return list(exp.get("server", {}).get("grid", {})) + list(exp.get("client", {}).get("grid", {}))


def enabled_experiments(config: dict) -> list[str]:
    """Experiments the default target runs: `run` if given, else all."""
    return list(config.get("run") or config["experiments"])
