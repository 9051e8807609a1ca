"""Experiments are data: expand an experiment's grids into server and client points.

An experiment is engine + model + workload + a grid of server knobs + a grid of
client (load) knobs. Each server point becomes one Snakemake job; its client
points are measured inside that job against one server.
"""

from __future__ import annotations

import itertools
import math
import re

# knobs of a server point that servelab consumes itself rather than passing as flags
MODEL_KNOB = "model"
# the client point that runs lm-eval against the server instead of a load benchmark
EVAL_KNOB = "lm_eval"
# a server point's environment variables swept by `server.env_grid` (week 15: LMCache settings)
ENV_KNOB = "env"
# client knob: how many times the session restarts the server before measuring the point
RESTART_KNOB = "restart"


def grid_points(grid: dict) -> list[dict]:
    """Cartesian product of a {knob: [values]} grid, in config order."""
    if not grid:
        return [{}]
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


def format_value(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, dict):
        return ",".join(f"{k}={format_value(v)}" for k, v in value.items())
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
    name = "+".join(f"{k}={format_value(v)}" for k, v in knobs.items())
    return re.sub(r"[^A-Za-z0-9._=,+-]", "_", name)


def server_points(exp: dict) -> dict[str, dict]:
    """{server point id: full server knobs (fixed args overlaid by the grid point)}.

    A grid may sweep `model` (names under `models:`), e.g. week 12's quantized
    checkpoints; the point's model is then `point_model(exp, knobs)`.
    """
    server = exp.get("server", {})
    points = {}
    combos = [(p, e) for p in grid_points(server.get("grid", {})) for e in grid_points(server.get("env_grid", {}))]
    for knobs, env in combos:
        points[point_id({**knobs, **env})] = {**server.get("args", {}), **knobs, **({ENV_KNOB: env} if env else {})}
    if len(points) != len(combos):
        raise ValueError(f"server grid values collide after making names path-safe: {sorted(points)}")
    return points


def point_model(exp: dict, knobs: dict) -> str:
    return knobs.get(MODEL_KNOB, exp["model"])


def engine_flags(knobs: dict) -> dict:
    """Server knobs that become engine flags (all but servelab's own)."""
    return {k: v for k, v in knobs.items() if k not in (MODEL_KNOB, ENV_KNOB)}


def point_env(knobs: dict) -> dict:
    """The environment variables a server point sets (from `server.env_grid`)."""
    return {k: str(v) for k, v in knobs.get(ENV_KNOB, {}).items()}


def gpus_needed(knobs: dict) -> int:
    """GPUs one server point occupies: tensor x pipeline x data parallel size
    (vLLM names; SGLang's tp/dp likewise)."""
    def size(*names):
        return next((int(knobs[n]) for n in names if knobs.get(n) is not None), 1)

    return (size("tensor_parallel_size", "tp", "tp_size") * size("pipeline_parallel_size", "pp_size")
            * size("data_parallel_size", "dp", "dp_size"))


def client_points(exp: dict) -> list[dict]:
    """Full client knobs of every load point (fixed args overlaid by the grid point)."""
    client = exp.get("client", {})
    return [{**client.get("args", {}), **p} for p in grid_points(client.get("grid", {}))]


def bench_knobs(knobs: dict) -> dict:
    """Client knobs the benchmark client takes (servelab's `restart` is not one)."""
    return {k: v for k, v in knobs.items() if k != RESTART_KNOB}


def session_points(exp: dict) -> list[dict]:
    """What one server's session measures: the load points, then lm-eval if the
    experiment has an `eval` section."""
    return client_points(exp) + ([{EVAL_KNOB: exp["eval"]}] if exp.get("eval") else [])


def swept_knobs(exp: dict) -> list[str]:
    """The knobs that vary inside an experiment: the columns a figure can use."""
    server = exp.get("server", {})
    return list(server.get("grid", {})) + list(server.get("env_grid", {})) + list(exp.get("client", {}).get("grid", {}))


def enabled_experiments(config: dict) -> list[str]:
    """Experiments the default target runs: `run` if given, else all."""
    return list(config.get("run") or config["experiments"])
