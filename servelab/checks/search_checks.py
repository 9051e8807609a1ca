"""The checks of an experiment's `search` section (servelab/search): what a search replaces, its
load's bracket, its space and start, its budget and its SLO; called by cross_checks."""

from __future__ import annotations

from servelab.search import slo as search_slo


def search_problems(exp: dict, where: str, config: dict) -> list[str]:
    """A search replaces the server grid and the client sweep: each session bisects one load
    knob, each round chooses configurations from the space."""
    search, problems = exp["search"], []
    server, client = exp.get("server", {}), exp.get("client", {})
    for section, key in (("server", "grid"), ("server", "configs"), ("server", "env_grid"),
                         ("client", "grid"), ("client", "workloads")):
        if (server if section == "server" else client).get(key):
            problems.append(f"{where}: a search chooses its own points; remove {section}.{key}")
    for key in ("eval", "topology"):
        if exp.get(key):
            problems.append(f"{where}: not with {key} (a search measures load points on one server)")
    if exp.get("kind", "serve") != "serve":
        problems.append(f"{where}: searches load against a server; kind must be serve")
    if exp.get("repeats", config.get("repeats", 1)) != 1:
        problems.append(f"{where}: each load step is measured once; set repeats: 1 for this experiment")
    if exp.get("repeat_until"):   # (a run-wide one leaves searches alone)
        problems.append(f"{where}: each load step is measured once; remove repeat_until "
                        f"(the frontier's confirm_repeats measure it again)")
    load = search["load"]
    if load["low"] >= load["high"]:
        problems.append(f"{where}.load: low ({load['low']}) must be below high ({load['high']})")
    if load["knob"] == "max_concurrency" and not all(float(v).is_integer() for v in (load["low"], load["high"])):
        problems.append(f"{where}.load: max_concurrency is a whole number of requests")
    if load["knob"] in client.get("args", {}):
        problems.append(f"{where}.load.knob: {load['knob']} is also fixed in client.args")
    both = set(search["space"]) & set(server.get("args", {}))
    if both:
        problems.append(f"{where}.space: knob(s) {sorted(both)} are also fixed in server.args")
    for knob, value in (search.get("start") or {}).items():
        if value not in search["space"].get(knob, []):
            problems.append(f"{where}.start.{knob}: {value!r} is not among the space's values "
                            f"{search['space'].get(knob)}")
    if search.get("strategy") == "grid" and "session_s" in search.get("budget", {}):
        problems.append(f"{where}.budget.session_s: a grid is one round and has no later round to cut; "
                        f"use strategy: coordinate, or budget.launches")
    problems += [f"{where}.slo: {p}" for p in search_slo.check(search["slo"])]
    return problems
