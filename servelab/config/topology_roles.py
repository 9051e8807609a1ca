"""What a multi-process server point's config means: a P/D pair's roles (the point's knobs
overlaid by each role's args and env) and an SGLang point's data-parallel replicas behind
its router (router_* knobs). Launching them is servelab.serve.topology's."""

from __future__ import annotations

from dataclasses import dataclass, field

from servelab.config import engine_facts as facts

ROLES = ("prefill", "decode")
DP_KNOBS = ("dp_size", "dp")


@dataclass
class Role:
    name: str
    knobs: dict
    env: dict = field(default_factory=dict)
    port: int = 0


def roles(server_knobs: dict, topology: dict) -> list[Role]:
    return [Role(name, {**server_knobs, **topology.get(name, {}).get("args", {})},
                 {k: str(v) for k, v in topology.get(name, {}).get("env", {}).items()}) for name in ROLES]


def replicas(engine: str, knobs: dict) -> tuple[list[Role], dict] | None:
    """The data-parallel replicas and router args of a point with its engine's router knobs
    (SGLang's router_*: facts.router_knob_prefix); None for any other point."""
    prefix = facts.of(engine).router_knob_prefix
    if not prefix or not any(k.startswith(prefix) for k in knobs):
        return None
    count = next((int(knobs[k]) for k in DP_KNOBS if knobs.get(k) is not None), 1)
    worker = {k: v for k, v in knobs.items() if not k.startswith(prefix) and k not in DP_KNOBS}
    router = {k[len(prefix):]: v for k, v in knobs.items() if k.startswith(prefix)}
    return [Role(f"replica{i}", dict(worker)) for i in range(count)], router
