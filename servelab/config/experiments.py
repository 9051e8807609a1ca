"""Experiments are data: expand an experiment's grids into server and client points.

An experiment is engine + model + workload + server points + client (load) points.
Server points are a cartesian grid of knobs, a list of named configurations
(`server.configs`, e.g. a tuning study's successive settings), or both; client points
are a grid, or named workloads each with a grid of its own (`client.workloads`). A
named configuration may bring its own client section. Each server point becomes one
Snakemake job; its client points are measured inside that job against one server.
An experiment with a `search` section searches its server space instead of running it
whole (servelab.search): its server points are the space's grid, of which a search
launches few, and each session bisects the load between two client points.
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
# a named server configuration's own client section (overlays the experiment's)
CLIENT_KNOB = "client"
# a named server configuration measured without (false) or with its record of conditions
RECORD_KNOB = "record_conditions"
# client knob: the named workload (`client.workloads`) a load point belongs to
WORKLOAD_KNOB = "workload"
# client knob: how long a load point holds its load, in seconds (servelab sizes num_prompts)
DURATION_KNOB = "duration_s"
# fewer requests than this sent inside a point's held window: too few to judge a steady
# state (servelab.search.steady_window)
HELD_MIN_REQUESTS = 10
# a closed loop sized in time is never given fewer than CLOSED_LOOP_WAVES x C + HELD_MIN_REQUESTS +
# CLOSED_LOOP_SPARE: C sent at once, up to C more sent before the window opens (requests shorter
# than the median end inside the ramp, half of the first wave and more where times vary), C in
# flight at the end, and 10 between; the spare covers runs of short requests at 1 or 2 in
# flight. Simulated loops whose request times spread log-normally with sigma 1 (p90/p10 ~13)
# all hold 10 at C = 1-16 (tests/search/test_steady_window.py); 2C + 10 left 8-10 % short at C = 1
CLOSED_LOOP_WAVES = 3
CLOSED_LOOP_SPARE = 2
# a point sized in time: its open-loop schedule this much longer than its duration, and a
# closed loop this many times what the warm-up's request time says it completes (requests
# per slot and second where the warm-up measured none); the bound cuts what is left
DURATION_SPARE = 1.1
CLOSED_LOOP_SPARE_X = 3
CLOSED_LOOP_UNKNOWN_PER_S = 1
# the most prompts a closed loop sized in time is given (the client samples them all first)
SIZED_MOST = 20000
# server.leave_out: the server point ids of an experiment not to run
LEAVE_OUT = "leave_out"
# an experiment's search section (servelab.search): space, load, slo, strategy, budget
SEARCH = "search"


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
    """{server point id: full server knobs (fixed args overlaid by the grid point or
    the named configuration)}; a named configuration's id is its name.

    A grid may sweep `model` (names under `models:`), e.g. week 12's quantized
    checkpoints; the point's model is then `point_model(exp, knobs)`.
    """
    server = exp.get("server", {})
    args, configs = server.get("args", {}), server.get("configs", {})
    grid = exp[SEARCH]["space"] if exp.get(SEARCH) else server.get("grid", {})
    points, count = {}, 0
    if grid or server.get("env_grid") or not configs:
        for knobs in grid_points(grid):
            for env in grid_points(server.get("env_grid", {})):
                points[point_id({**knobs, **env})] = {**args, **knobs, **({ENV_KNOB: env} if env else {})}
                count += 1
    for name, knobs in configs.items():
        points[name] = {**args, **(knobs or {})}
        count += 1
    if len(points) != count:
        raise ValueError(f"server point names collide (grid values made path-safe, or a named "
                         f"configuration named like a grid point): {sorted(points)}")
    # points not to run (servelab.checks.box_fit: more GPUs or memory than the box has)
    left_out = set(server.get(LEAVE_OUT) or [])
    if unknown := left_out - set(points):
        raise ValueError(f"leave_out names no server point: {sorted(unknown)} (points: {sorted(points)})")
    return {sp: knobs for sp, knobs in points.items() if sp not in left_out}


def point_model(exp: dict, knobs: dict) -> str:
    return knobs.get(MODEL_KNOB, exp["model"])


def engine_flags(knobs: dict) -> dict:
    """Server knobs that become engine flags (all but servelab's own)."""
    return {k: v for k, v in knobs.items() if k not in (MODEL_KNOB, ENV_KNOB, CLIENT_KNOB, RECORD_KNOB)}


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


def client_section(exp: dict, server_knobs: dict | None = None) -> dict:
    """The client section a server point measures: the experiment's, overlaid by a
    named configuration's own (args merge; grid and workloads replace)."""
    client = exp.get("client", {})
    own = (server_knobs or {}).get(CLIENT_KNOB)
    if not own:
        return client
    return {"args": {**client.get("args", {}), **own.get("args", {})},
            "grid": own.get("grid", client.get("grid", {})),
            "workloads": own.get("workloads", client.get("workloads", {}))}


def client_points(exp: dict, server_knobs: dict | None = None) -> list[dict]:
    """Full client knobs of every load point of a server point (fixed args overlaid by
    the grid point; with named workloads, by the workload's args and its own grid)."""
    client = client_section(exp, server_knobs)
    args, grid = client.get("args", {}), client.get("grid", {})
    if exp.get(SEARCH):   # the ends of the load a session bisects between
        load = exp[SEARCH]["load"]
        return [{**args, load["knob"]: load["low"]}, {**args, load["knob"]: load["high"]}]
    workloads = client.get("workloads") or {}
    if not workloads:
        return [{**args, **p} for p in grid_points(grid)]
    return [{**args, **(w.get("args") or {}), **p, WORKLOAD_KNOB: name}
            for name, w in workloads.items() for p in grid_points({**grid, **(w.get("grid") or {})})]


def all_client_points(exp: dict) -> list[dict]:
    """Client points of every server point (what a check of the client's flags covers)."""
    seen, out = set(), []
    for knobs in server_points(exp).values():
        for point in client_points(exp, knobs):
            key = repr(sorted(point.items(), key=lambda kv: kv[0]))
            if key not in seen:
                seen.add(key)
                out.append(point)
    return out


def bench_knobs(knobs: dict) -> dict:
    """Client knobs the benchmark client takes (servelab's `restart`, `workload` and
    `duration_s` are not)."""
    return {k: v for k, v in knobs.items() if k not in (RESTART_KNOB, WORKLOAD_KNOB, DURATION_KNOB)}


def sending_floor(knobs: dict) -> int:
    """The fewest requests a point sized in time sends, past its duration if need be: a
    closed loop's floor (closed_loop_floor); none for an open loop, capped or not (its rate
    sets what it sends; its prompts are sized from that rate, sized_prompts)."""
    if not knobs.get("max_concurrency") or open_loop_rate(knobs) is not None:
        return 0
    return closed_loop_floor(knobs["max_concurrency"])


def open_loop_rate(knobs: dict) -> float | None:
    """An open loop's request rate (requests a second); None for a closed loop (rate inf or unset)."""
    rate = knobs.get("request_rate")
    return float(rate) if rate not in (None, "inf") and math.isfinite(float(rate)) else None


def closed_loop_floor(concurrency: int) -> int:
    """The fewest prompts a closed loop at `concurrency` in flight, sized in time, sends."""
    return CLOSED_LOOP_WAVES * concurrency + HELD_MIN_REQUESTS + CLOSED_LOOP_SPARE


def sized_prompts(knobs: dict, request_s: float | None, sent_per_s: float | None = None) -> int | None:
    """The prompts a load point sized in time is given: more than it can send in its
    `duration_s`, since its client is stopped at that duration (servelab.engines.clients.time_bound)
    and what it was not sent is never created. An open loop's schedule runs
    DURATION_SPARE longer than the duration (the client spreads num_prompts over
    num_prompts / rate); a closed loop gets CLOSED_LOOP_SPARE_X times what its concurrency
    completes in the duration at the warm-up's request time (the warm-up runs at low load,
    so its requests are the shortest), never fewer than its floor; where the same load ran
    before (its warm-up at load), DURATION_SPARE times the requests it sent a second there,
    plus a wave (sampling prompts costs the client: 5,324 of 512 tokens took 30 s on an
    H200's host where 768 were sent). num_prompts is the least; a point without a duration
    sends its num_prompts."""
    duration, floor = knobs.get(DURATION_KNOB), knobs.get("num_prompts")
    if duration is None:
        return floor
    rate = open_loop_rate(knobs)
    if rate is not None:
        wanted = math.ceil(rate * duration * DURATION_SPARE - 1e-9) + 1
    elif knobs.get("max_concurrency"):
        concurrency = knobs["max_concurrency"]
        per_slot = duration / request_s if request_s else CLOSED_LOOP_UNKNOWN_PER_S * duration
        guess = sent_per_s * duration * DURATION_SPARE + concurrency if sent_per_s else \
            CLOSED_LOOP_SPARE_X * concurrency * per_slot
        wanted = max(min(guess, SIZED_MOST), closed_loop_floor(concurrency))
    else:   # a closed loop without a concurrency: its floor
        wanted = 0
    return max(int(floor or 1), math.ceil(wanted))


def session_points(exp: dict, server_knobs: dict | None = None) -> list[dict]:
    """What one server's session measures: the load points, then lm-eval if the
    experiment has an `eval` section."""
    return client_points(exp, server_knobs) + ([{EVAL_KNOB: exp["eval"]}] if exp.get("eval") else [])


def swept_knobs(exp: dict) -> list[str]:
    """The knobs that vary inside an experiment: the columns a figure can use."""
    server = exp.get("server", {})
    out = list(server.get("grid", {})) + list(server.get("env_grid", {}))
    if exp.get(SEARCH):
        out += list(exp[SEARCH]["space"]) + [exp[SEARCH]["load"]["knob"]]
    for knobs in (server.get("configs") or {}).values():
        out += [k for k in engine_flags(knobs or {}) if k not in out]
    for knobs in server_points(exp).values():
        client = client_section(exp, knobs)
        names = list(client.get("grid", {}))
        for w in (client.get("workloads") or {}).values():
            names += [WORKLOAD_KNOB, *(w.get("args") or {}), *(w.get("grid") or {})]
        for k in names:
            out += [] if k in out else [k]
    return out


def load_knobs(exp: dict) -> list[str]:
    """The swept knobs of the load side (client grid, workloads): what makes a load point."""
    server = exp.get("server", {})
    on_server = set(server.get("grid", {})) | set(server.get("env_grid", {}))
    for knobs in (server.get("configs") or {}).values():
        on_server |= set(engine_flags(knobs or {}))
    return [k for k in swept_knobs(exp) if k not in on_server]


def compares_configurations(exp: dict) -> bool:
    """An experiment of several configurations (server points) measured at the same loads:
    it gets comparisons.csv (a search has its own verdicts)."""
    return not exp.get(SEARCH) and len(server_points(exp)) > 1


def enabled_experiments(config: dict) -> list[str]:
    """Experiments the default target runs: `run` if given, else all."""
    return list(config.get("run") or config["experiments"])
