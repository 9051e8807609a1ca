"""One measured point as an llm-d benchmark report, version 0.2.1 (servelab/export/llmd_schema.py).

A report is made from the point's row of the table (results/EXP/metrics.csv), its store
records (the server's knobs, command, environment, engine version and hardware) and its raw
results: a latency's statistics are over the point's requests (every repeat's pooled,
servelab/export/pooled.py), with each repeat's figures beside them; where the raw results
keep no per-request figures, the table's (a repeated point: the mean of its repeats', and
the report says so). Times are in seconds (the table's milliseconds / 1000). What maps
where: docs/export-and-import.md.
"""

from __future__ import annotations

import hashlib
import json
import math

from servelab.config import engine_facts as facts
from servelab.engines.registry import ENGINES
from servelab.export import pooled as pooling
from servelab.export.llmd_results import (component_health, number, observability, request_performance,
                                          total_input_tokens, value)
from servelab.export.llmd_schema import VERSION



def cfg_id(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def load_text(knobs: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in knobs.items()) or "the one load"


def parallelism(server: dict) -> dict:
    def knob(*names):
        return next((int(server[n]) for n in names if isinstance(server.get(n), (int, float))), 1)
    tp = knob("tensor_parallel_size", "tp_size", "tp")
    dp = knob("data_parallel_size", "dp_size", "dp")
    pp = knob("pipeline_parallel_size", "pp_size", "pp")
    ep = tp * dp if server.get("enable_expert_parallel") or server.get("enable_ep_moe") else 1
    return {"tp": tp, "dp": dp, "pp": pp, "ep": ep}


def accelerator(hardware: dict, par: dict) -> dict:
    """The GPUs the server used; on a CPU run the CPU, with no accelerator counted."""
    gpus = hardware.get("gpus") or []
    if gpus:
        return {"model": gpus[0].split(",")[0].strip(), "count": par["tp"] * par["dp"] * par["pp"],
                "parallelism": par}
    return {"model": f"CPU: {hardware.get('cpu') or 'unknown'}", "count": 0, "parallelism": par}


def engine_component(row: dict, record: dict, label: str, *, role: str = "replica", knobs: dict | None = None,
                     env: dict | None = None, replicas: int = 1) -> dict:
    """One engine server (a P/D pair's role: its knobs and environment) as a stack component."""
    identity, prov = record["identity"], record.get("provenance") or {}
    server = identity.get("server") or {} if knobs is None else knobs
    par = parallelism(server)
    if replicas > 1:   # servers of their own, each with its share of the data parallelism
        par["dp"] = max(par["dp"] // replicas, 1)
    hardware = accelerator(identity.get("hardware") or {}, par)
    hardware["count"] *= replicas
    return {
        "metadata": {"schema_version": "0.0.1", "label": label,
                     "cfg_id": cfg_id([identity.get("engine"), identity.get("engine_version"), identity.get("model"),
                                       server, identity.get("env"), env]),
                     "description": f"servelab server point {record['server_point']} of {record['experiment']}"
                                    + ("" if role == "replica" else f", its {role} server")},
        "standardized": {"kind": "inference_engine", "tool": identity.get("engine") or "unknown",
                         "tool_version": str(identity.get("engine_version") or "unknown"), "role": role,
                         "replicas": replicas, "model": {"name": str(identity.get("model"))},
                         "accelerator": hardware},
        "native": {"args": server, "envars": {**(identity.get("env") or {}), **(prov.get("server_env") or {}),
                                              **(env or {})},
                   "config": {k: v for k, v in {
                       "serve_command": prov.get("serve_command"), "packages": prov.get("packages"),
                       "hardware": identity.get("hardware"), "git_commit": prov.get("git_commit"),
                       "config_hash": prov.get("config_hash"),
                       "startup_s": number(row, "server_startup_s")}.items() if v is not None}},
    }


def stack(row: dict, record: dict, label: str) -> list[dict]:
    """The server point's processes: one engine; SGLang's data-parallel replicas (one
    component, its replicas counted); or a P/D pair's prefill and decode servers and their router."""
    from servelab.config import topology_roles as topo

    identity = record["identity"]
    server, layout = identity.get("server") or {}, identity.get("topology")
    if not layout or layout.get("kind") != "pd":
        found = topo.replicas(identity.get("engine"), server)
        return [engine_component(row, record, label, replicas=len(found[0]) if found else 1)]
    components = [engine_component(row, record, f"{label}-{role.name}", role=role.name, knobs=role.knobs,
                                   env=role.env) for role in topo.roles(server, layout)]
    router = "servelab-pd-proxy" if facts.of(identity.get("engine")).pd_proxy else f"{identity.get('engine')}-router"
    components.append({"metadata": {"schema_version": "0.0.1", "label": f"{label}-router",
                                    "cfg_id": cfg_id(layout.get("router") or {}),
                                    "description": "the router the client talks to, in front of the P/D pair"},
                       "standardized": {"kind": "generic", "tool": router,
                                        "tool_version": str(identity.get("engine_version") or "unknown")},
                       "native": {"args": (layout.get("router") or {}).get("args") or {}}})
    return components


def seq_len(row: dict, knobs: dict, knob_names: tuple, total_column: str) -> dict | None:
    """A fixed length where the client was told one, else the measured mean (distribution `other`)."""
    for name in knob_names:
        if isinstance(knobs.get(name), (int, float)) and not isinstance(knobs.get(name), bool):
            spread = knobs.get("random_range_ratio") if name.startswith("random_") else None
            if isinstance(spread, (int, float)) and 0 < spread < 1:   # vLLM's random lengths: uniform about it
                return {"distribution": "uniform", "value": knobs[name],
                        "min": int(knobs[name] * (1 - spread)), "max": max(int(knobs[name] * (1 + spread)), 1)}
            return {"distribution": "fixed", "value": knobs[name]}
    total, done = number(row, total_column), number(row, "completed")
    if total is not None and done:
        return {"distribution": "other", "value": total / done}
    return None


def client_tool(record: dict, raw: dict | None = None) -> tuple[str, str]:
    """The load generator and its version: the offline benchmark, AIPerf (its version as its
    own result says, else as installed), else the engine's own serving benchmark (of the
    engine's version)."""
    identity, prov = record["identity"], record.get("provenance") or {}
    kind, version = str(identity.get("kind") or ""), str(identity.get("engine_version") or "unknown")
    command = str(prov.get("bench_args") or "").split()
    face = ENGINES.get(identity.get("engine"))
    if kind.startswith("offline:"):
        return ((face.llmd_offline_tools if face else {}).get(kind.split(":", 1)[-1], kind)), version
    if client := (facts.client_of_program(command[0]) if command else None):   # a client of its own: AIPerf
        return client.name, str((raw or {}).get("client_version")
                                or (prov.get("packages") or {}).get(client.distribution) or "unknown")
    return (face and face.llmd_load_tool) or f"{identity.get('engine')}-client", version


def load_section(row: dict, record: dict, keys: list[str], raw: dict | None = None, stage: int = 0) -> dict | None:
    """The load generator and the load; None where nothing counted the prompts' lengths
    (the schema requires them, and a made-up 0 would be read as a length)."""
    identity, knobs = record["identity"], record["client_knobs"]
    tool, tool_version = client_tool(record, raw)
    turns = knobs.get("multi_turn") if isinstance(knobs.get("multi_turn"), dict) else None
    if turns:   # conversations: a turn's reply length, and the users at once (a turn's input holds its history)
        knobs = {**knobs, "output_len": turns.get("output_len"), "max_concurrency": turns.get("users")}
    dataset = str(identity.get("dataset") or "")
    source = "random" if any(k.startswith("random_") for k in knobs) or turns or \
        dataset.startswith(("builtin:random", "random")) else "sampled" if dataset else "unknown"
    isl = seq_len({**row, "total_input_tokens": total_input_tokens(row, knobs)}, knobs,
                  ("random_input_len", "input_len", "prefix_repetition_prefix_len"), "total_input_tokens")
    osl = seq_len(row, knobs, ("random_output_len", "output_len", "sharegpt_output_len"), "total_output_tokens")
    if isl is None:
        return None
    standardized = {"tool": tool, "tool_version": tool_version, "parallelism": 1,
                    "source": source, "stage": stage, "input_seq_len": isl}
    if osl:
        standardized["output_seq_len"] = osl
    rate = number(row, "request_rate")
    if rate is not None and rate > 0:
        standardized["rate_qps"] = rate
    if isinstance(knobs.get("max_concurrency"), int) and knobs["max_concurrency"] >= 1:
        standardized["concurrency"] = knobs["max_concurrency"]
    if turns and isinstance(turns.get("turns"), int) and turns["turns"] >= 0:
        standardized["multi_turn"] = {"enabled": True, "max_turns": {"distribution": "fixed", "value": turns["turns"]}}
    prov = record.get("provenance") or {}
    asked = record["client_knobs"]
    return {"metadata": {"schema_version": "0.0.1", "cfg_id": cfg_id([asked, dataset, identity.get("measurement")]),
                         "description": f"{tool} at {load_text(asked)}"},
            "standardized": standardized,
            "native": {"args": asked, "config": {k: v for k, v in {
                "bench_args": prov.get("bench_args"), "dataset": dataset or None,
                "measurement": identity.get("measurement"), "warmup_prompts": value(row, "warmup_prompts"),
                "repeats": int(value(row, "repeats") or 1), "point_keys": keys}.items() if v is not None}}}


def report(row: dict, records: list[dict], raws: list[dict] | None = None, stage: int = 0) -> dict:
    """The report of one table row (`records`: its repeats' store records, the first's facts;
    `raws`: their raw results where the store has them; `stage`: its place among its server
    point's loads)."""
    record = records[0]
    keys = [r["key"] for r in records]
    knobs = record["client_knobs"]
    requests = pooling.from_raws(raws) if raws else None
    components = stack(row, record, f"{record['identity'].get('engine')}-{record['server_point']}")
    # the engine whose counters the point reports: a P/D pair's decode server (NIXL's transfers land there)
    label = next((c["metadata"]["label"] for c in components if c["standardized"].get("role") == "decode"),
                 components[0]["metadata"]["label"])
    failure = record.get("failure")
    valid = value(row, "valid")
    state = (f"FAILED ({failure['stage']}: {failure['reason']})" if failure
             else "" if valid in (None, True) or valid == 1 else f"invalid ({value(row, 'invalid_reason')})")
    run = {"uid": "+".join(keys), "eid": f"servelab:{record['experiment']}",
           "description": f"{record['identity'].get('model')} [{record['experiment']}/{record['server_point']}, "
                          f"{load_text(knobs)}]" + (f" {state}" if state else ""),
           "keywords": ["servelab", record["experiment"], *(["failed"] if failure else ["invalid"] if state else [])]}
    if (duration := number(row, "duration_s")) is not None:
        run["time"] = {"duration": f"PT{duration:.3f}S"}
    results = {}
    if not failure and (perf := request_performance(row, knobs, requests)) is not None:
        results["request_performance"] = perf
    results["observability"] = observability(row, label, knobs, requests)
    results["component_health"] = component_health(record, label)
    load = load_section(row, record, keys, raws[0] if raws else None, stage)
    point = results["observability"]["servelab_point"]
    point["identity"] = {"experiment": record["experiment"], "server_point": record["server_point"],
                         "point_key": str(value(row, "point_key") or ";".join(keys))}
    point["knobs"] = {k: v if not isinstance(v, float) or math.isfinite(v) else str(v)   # inf as "inf" (JSON)
                      for k, v in {**(record["identity"].get("server") or {}), **knobs}.items()
                      if isinstance(v, (str, int, bool, float)) and not (isinstance(v, float) and math.isnan(v))}
    for column in ("request_rate", "max_concurrency", "num_prompts"):   # the load point as the table has it
        if isinstance(v := value(row, column), (int, float)) and not isinstance(v, bool):
            point["knobs"][column] = v if math.isfinite(v) else str(v)
    if (trend := number(row, "ttft_trend")) is not None:
        point["ttft_trend"] = trend
    if load is None:   # the client knobs stay in the report
        results["observability"]["servelab_point"]["load_without_lengths"] = knobs
    return {"version": VERSION, "run": run,
            "scenario": {"stack": components, **({"load": load} if load else {})},
            "results": results}
