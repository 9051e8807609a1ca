"""Sessions of different experiments that would start the same engine share one start
(`share_engines: true`): the first such session in run order hosts the engine and
measures the others' missing points on it, each with its own client, warm-up, store and
drift check; their own jobs then find nothing to measure and launch nothing.

Only what a shared engine cannot change is shared: server sessions without a restart
sweep, topology, monitor, load search or interleaved rounds (a profiler's trace or a restart belongs to one
experiment), with the same engine, model, flags, environment and prefix-cache setting
(it sets the server's environment), and offline sessions of the same benchmark tool
(its runner reuses an engine whose arguments are equal).
"""

from __future__ import annotations

import json

from servelab.config.experiments import RESTART_KNOB


def engine_key(params: dict) -> str | None:
    """What decides the engine a session starts (from its session params), or None
    for a session that cannot share one."""
    if params.get("topology") or params.get("monitors") or params.get("load_search") or params.get("rounds"):
        return None   # (a configuration in rounds is measured beside its experiment's others)
    if any(point.get(RESTART_KNOB) for point in params["client_points"]):
        return None
    return json.dumps({
        "engine": params["engine"], "kind": params["kind"], "tool": params.get("tool"),
        "model": params["model_identity"], "server": params["server_knobs"], "env": params["env"],
        "reset_prefix_cache": params["measurement"].get("reset_prefix_cache"),
        "startup_timeout_s": params["startup_timeout_s"],
    }, sort_keys=True, default=str)


def hosts(sessions: dict[tuple[str, str], dict]) -> dict[tuple[str, str], tuple[str, str]]:
    """{guest session: its host} over sessions {(experiment, server point): params} in
    run order; a session that hosts or shares nothing is not in it."""
    first: dict[str, tuple[str, str]] = {}
    guests = {}
    for session, params in sessions.items():
        key = engine_key(params)
        if key is None:
            continue
        if key in first:
            guests[session] = first[key]
        else:
            first[key] = session
    return guests


def summary(guests: dict[tuple[str, str], tuple[str, str]], sessions: int) -> str:
    """One line for a run's start: how many engine starts its sessions need, and which
    sessions ride on which."""
    if not guests:
        return ""
    pairs = ", ".join(f"{'/'.join(g)} on {'/'.join(h)}" for g, h in guests.items())
    return f"{sessions} sessions, {sessions - len(guests)} engine starts: {pairs}"
