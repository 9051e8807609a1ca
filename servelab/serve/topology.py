"""Multi-process server points: a prefill/decode pair behind a router (week 16).

An experiment's `topology: {kind: pd, prefill, decode, router}` turns one server
point into three processes: a prefill server and a decode server (the point's
knobs overlaid by each role's `args`, and the role's `env`), then a front
process the client talks to:
- vLLM: servelab.engines.pd_proxy (vLLM's wheel ships no proxy);
- SGLang: sglang_router's P/D router (`--pd-disaggregation`).
Ports the roles need (HTTP, NIXL side channel, SGLang bootstrap) are picked
free at launch, so two sessions on one node do not collide. On a GPU node the
job's devices are split between the roles in order.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from servelab.config.experiments import gpus_needed

ROLES = ("prefill", "decode")


@dataclass
class Role:
    name: str
    knobs: dict
    env: dict = field(default_factory=dict)
    port: int = 0


def roles(server_knobs: dict, topology: dict) -> list[Role]:
    return [Role(name, {**server_knobs, **topology.get(name, {}).get("args", {})},
                 {k: str(v) for k, v in topology.get(name, {}).get("env", {}).items()}) for name in ROLES]


def topology_gpus(server_knobs: dict, topology: dict | None) -> int:
    """GPUs a server point needs: one server's, or the sum over the P/D roles."""
    if not topology:
        return gpus_needed(server_knobs)
    return sum(gpus_needed(role.knobs) for role in roles(server_knobs, topology))


def split_devices(visible: str | None, counts: list[int]) -> list[str | None]:
    """CUDA_VISIBLE_DEVICES of each role, in order, from the job's own list."""
    if not visible:
        return [None] * len(counts)
    devices = visible.split(",")
    if len(devices) < sum(counts):
        raise ValueError(f"the job sees {len(devices)} device(s) ({visible}) but the roles need {sum(counts)}")
    out, start = [], 0
    for n in counts:
        out.append(",".join(devices[start:start + n]))
        start += n
    return out


def assign_ports(engine: str, rs: list[Role], free_port) -> None:
    """HTTP ports and the side ports the transfer backends listen on."""
    for role in rs:
        role.port = free_port()
        if engine == "vllm":
            role.env.setdefault("VLLM_NIXL_SIDE_CHANNEL_PORT", str(free_port()))
        if engine == "sglang" and role.name == "prefill":
            role.knobs.setdefault("disaggregation_bootstrap_port", free_port())


def router_command(engine: str, rs: list[Role], port: int, router_args: dict) -> list[str]:
    from servelab.engines.commands import to_flags

    prefill, decode = rs
    if engine == "vllm":
        return [sys.executable, "-m", "servelab.engines.pd_proxy", "--port", str(port),
                "--prefill", f"http://127.0.0.1:{prefill.port}", "--decode", f"http://127.0.0.1:{decode.port}",
                *to_flags(router_args)]
    return [sys.executable, "-m", "sglang_router.launch_router", "--pd-disaggregation",
            "--prefill", f"http://127.0.0.1:{prefill.port}", str(prefill.knobs["disaggregation_bootstrap_port"]),
            "--decode", f"http://127.0.0.1:{decode.port}", "--host", "127.0.0.1", "--port", str(port),
            *to_flags(router_args, false_flags=False)]
