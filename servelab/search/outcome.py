"""What a search learnt: each configuration's goodput from its session's points, the
rounds in order, and the best configuration with its SLO margins and serve command.

A configuration's goodput is the output throughput (tokens/s) measured at the highest
load that met the SLO, over that point's held window (servelab.search.steady_window); 0 when even the lowest load missed it (or the server refused
the configuration), with the reason kept. Its cost is the server time it took: each
session's start-up and the client time of its points (what a time budget counts).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from servelab.config import engine_facts as facts
from servelab.config.experiments import gpus_needed, point_id
from servelab.search import steady_window
from servelab.search import slo as slo_check
from servelab.raw_result import read_raw

TIE_WITHIN = 0.05   # default relative noise under which two goodputs are a tie
RULE = ("the highest goodput wins unless others are within its noise (tie_within, widened by the "
        "sessions' own drift in output throughput): among those ties the cheapest wins, fewest GPUs, "
        "then the knobs nearest the search's start. Where the highest and the runner-up were measured "
        "again (confirm_repeats), Welch's t on their repeats decides between them: the higher wins alone "
        "only when distinguishably higher, else they tie")


SESSION_FLAGS = ("--host", "--port", "--served-model-name")


def as_typed(command: str | None) -> str | None:
    """The session's server command as a user types it (`vllm serve MODEL --flags`, where
    servelab ran it through its own entry point to the engine's CLI: the fact `own_cli`),
    its host, port and served name left out (any free port serves)."""
    words = shlex.split(command or "")
    typed = next((f.own_cli[1] for f in facts.FACTS.values()
                  if f.own_cli and words[1:4] == ["-m", f.own_cli[0], "serve"]), None)
    if typed is None:
        return command
    kept, skip = [], False
    for word in words[4:]:
        if not skip and word not in SESSION_FLAGS:
            kept.append(word)
        skip = not skip and word in SESSION_FLAGS
    return shlex.join([*typed.split(), *kept])


def read_view(view_file: str | Path, store_dir: str | Path) -> list[tuple[dict, dict | None]]:
    """[(record, its saved benchmark result or None)] of one session view."""
    out = []
    for record in json.loads(Path(view_file).read_text()):
        out.append((record, None if record.get("failure") else read_raw(Path(store_dir) / record["key"])))
    return out


def session_seconds(records: list[dict]) -> float:
    """Server time the points took: the start-up of each session they were measured in
    (once per session) and every point's client time."""
    startups = {r.get("session"): r.get("server_startup_s") or 0.0 for r in records}
    return sum(startups.values()) + sum(r.get("client_wall_s") or 0.0 for r in records)


def config_outcome(points: list[tuple[dict, dict | None]], load_knob: str, slo: dict) -> dict:
    """Goodput, the highest load that met the SLO, its margins, and why no higher load did."""
    judged = []
    for record, bench in points:
        met, margins, why = slo_check.judge(slo, bench, record.get("failure"))
        judged.append((record["client_knobs"][load_knob], met, margins, why, bench or {}, record))
    passing = [j for j in judged if j[1]]
    drifts = [abs(d) for record, _ in points
              if isinstance(d := (record.get("drift") or {}).get("output_throughput"), (int, float))]
    out = {"points": len(judged), "max_load": None, "goodput_tps": 0.0, "request_throughput_rps": None,
           "window": None, "margins": {}, "serve_command": None, "limited_by": "",
           "session_s": round(session_seconds([record for record, _ in points]), 1),
           "drift": max(drifts) if drifts else None}
    if passing:
        load, _, margins, _, bench, record = max(passing, key=lambda j: j[0])
        figures = steady_window.held(bench)   # the held window's, where the point had one
        out.update(max_load=load, goodput_tps=figures.get("output_throughput") or 0.0,
                   request_throughput_rps=figures.get("request_throughput"), window=figures["window"],
                   margins=margins,
                   serve_command=(record.get("provenance") or {}).get("serve_command"))
    above = sorted((j for j in judged if not j[1] and (out["max_load"] is None or j[0] > out["max_load"])),
                   key=lambda j: j[0])
    if above:
        out["limited_by"] = f"at {load_knob}={above[0][0]}: {above[0][3]}"
    elif passing:
        out["limited_by"] = f"met at the highest load searched ({load_knob}={out['max_load']})"
    return out


def rounds_table(rounds: list[dict], outcomes: dict[str, dict]) -> list[dict]:
    """One row per configuration tried, in the order tried: its round, knobs and outcome."""
    rows = []
    for plan in rounds:
        for config in plan["configs"]:
            sp = point_id(config)
            o = outcomes[sp]
            rows.append({"round": plan["round"], "server_point": sp, **config,
                         "goodput_tps": o["goodput_tps"], "max_load": o["max_load"],
                         "request_throughput_rps": o["request_throughput_rps"], "window": o.get("window"),
                         "points": o["points"], "session_s": o["session_s"], **{f"margin_{k}": v for k, v in o["margins"].items()},
                         "limited_by": o["limited_by"]})
    return rows


def best_config(rows: list[dict], outcomes: dict[str, dict], search: dict, confirmed: dict | None = None) -> dict:
    """The best configuration tried, as best.json holds it: the highest goodput, or the
    cheapest of those within noise of it; `confirmed`: the verdict between the highest and
    the runner-up from their repeats (servelab.search.confirm.decide), which overrides noise."""
    launches, spent = len(rows), round(sum(r["session_s"] for r in rows), 1)
    if not rows or max(r["goodput_tps"] for r in rows) <= 0:
        return {"found": False, "launches": launches, "session_s": spent, "rounds": len({r["round"] for r in rows}),
                "reason": "no configuration tried met the SLO at the lowest load",
                "slo": search["slo"], "load": search["load"]}
    top = max(rows, key=lambda r: r["goodput_tps"])
    ties = tied_with(top, rows, outcomes, search)
    if confirmed and confirmed["verdict"] == "distinguishable":
        ties = [r for r in rows if r["server_point"] == confirmed["higher"]][:1]
    elif confirmed:
        ties += [r for r in rows if r["server_point"] in confirmed["configs"] and r not in ties]
    row = min(ties, key=lambda r: cost(r, search))
    o = outcomes[row["server_point"]]
    repeated = (confirmed or {}).get("configs", {}).get(row["server_point"])
    return {"found": True, "server_point": row["server_point"],
            "rule": RULE, "tie_within": noise(top, outcomes, search),
            "ties": [r["server_point"] for r in ties],
            "highest_goodput": {"server_point": top["server_point"], "goodput_tps": top["goodput_tps"]},
            "config": {k: row[k] for k in search["space"]},
            "goodput_tps": repeated["goodput_tps_mean"] if repeated else o["goodput_tps"],
            "request_throughput_rps": o["request_throughput_rps"], "window": o.get("window"),
            **({"confirmation": confirmed} if confirmed else {}),
            "max_load": {search["load"]["knob"]: o["max_load"]}, "slo": search["slo"], "slo_margins": o["margins"],
            "limited_by": o["limited_by"], "vllm_serve": as_typed(o["serve_command"]),
            "serve_command": o["serve_command"],
            "launches": launches, "session_s": spent, "rounds": len({r["round"] for r in rows}),
            "strategy": search["strategy"]}


def noise(row: dict, outcomes: dict[str, dict], search: dict) -> float:
    """The relative goodput difference a configuration's measurement cannot tell from noise."""
    drift = outcomes[row["server_point"]].get("drift") or 0.0
    return max(float(search.get("tie_within", TIE_WITHIN)), drift)


def tied_with(top: dict, rows: list[dict], outcomes: dict[str, dict], search: dict) -> list[dict]:
    """The configurations whose goodput is within noise of the highest (it included)."""
    seen, out = set(), []
    for r in rows:
        if r["server_point"] in seen or r["goodput_tps"] <= 0:
            continue
        within = max(noise(top, outcomes, search), noise(r, outcomes, search))
        if r["goodput_tps"] >= top["goodput_tps"] * (1 - within):
            seen.add(r["server_point"])
            out.append(r)
    return out


def cost(row: dict, search: dict) -> tuple:
    """Cheaper first: GPUs the server needs, then how far its knobs are from the search's
    start (each knob's middle value unless `start` names it), then the higher goodput."""
    space, start = search["space"], search.get("start") or {}
    distance = 0
    for knob, values in space.items():
        origin = values.index(start[knob]) if knob in start and start[knob] in values else (len(values) - 1) // 2
        distance += abs(values.index(row[knob]) - origin) if row.get(knob) in values else len(values)
    return gpus_needed({k: row.get(k) for k in space}), distance, -row["goodput_tps"]
