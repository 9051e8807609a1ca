"""Multi-process server points: a prefill/decode pair behind a router (week 16), and
data-parallel replicas behind SGLang's router (week 9).

An experiment's `topology: {kind: pd, prefill, decode, router}` turns one server
point into three processes: a prefill server and a decode server (the point's
knobs overlaid by each role's `args`, and the role's `env`), then a front
process the client talks to:
- vLLM: servelab.engines.vllm.pd_proxy (vLLM's wheel ships no proxy);
- SGLang: sglang_router's P/D router (`--pd-disaggregation`).
Ports the roles need (HTTP, NIXL side channel, SGLang bootstrap) are picked
free at launch, so two sessions on one node do not collide. On a GPU node the
job's devices are split between the roles in order.

SGLang's `dp_size` with `router_*` knobs means what `sglang_router.launch_server`
does in one command: `dp_size` servers behind its router (`--router-policy` ->
the router's `--policy`). servelab launches them itself: sglang-router 0.3.2's
launch_server imports `sglang.srt.utils.is_port_available`, which SGLang 0.5.17
no longer has, and one process per replica lets each
replica's death be seen on its own.
"""

from __future__ import annotations

import sys

from servelab.config.experiments import gpus_needed
from servelab.config.topology_roles import Role, replicas, roles  # noqa: F401 (roles, replicas: its users')
from servelab.config import engine_facts as facts

def fleet_roles(engine: str, knobs: dict, topology: dict | None, free_port) -> tuple[list[Role], int, list[str]] | None:
    """The engine servers of a multi-process point (ports assigned), the router's port and
    command; None for a point served by one process."""
    if topology:
        rs = roles(knobs, topology)
        assign_ports(engine, rs, free_port)
        port = free_port()
        return rs, port, router_command(engine, rs, port, topology.get("router", {}).get("args", {}), free_port=free_port)
    if data_parallel := replicas(engine, knobs):
        rs, router_args = data_parallel
        for role in rs:
            role.port = free_port()
        port = free_port()
        return rs, port, replica_router_command(rs, port, router_args, free_port)
    return None


def topology_gpus(server_knobs: dict, topology: dict | None) -> int:
    """GPUs a server point needs: one server's (data-parallel replicas included), or the
    sum over the P/D roles."""
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
    side_channel, bootstrap = facts.of(engine).pd_side_channel_env, facts.of(engine).pd_bootstrap_port_knob
    for role in rs:
        role.port = free_port()
        if side_channel:
            role.env.setdefault(side_channel, str(free_port()))
        if bootstrap and role.name == "prefill":
            role.knobs.setdefault(bootstrap, free_port())


def router_command(engine: str, rs: list[Role], port: int, router_args: dict, *, free_port) -> list[str]:
    from servelab.engines.commands import to_flags

    prefill, decode = rs
    if facts.of(engine).pd_proxy:   # servelab's own (its wheel ships none); else its router package's
        return [sys.executable, "-m", "servelab.engines.vllm.pd_proxy", "--port", str(port),
                "--prefill", f"http://127.0.0.1:{prefill.port}", "--decode", f"http://127.0.0.1:{decode.port}",
                *to_flags(router_args)]
    return [sys.executable, "-m", "sglang_router.launch_router", "--pd-disaggregation",
            "--prefill", f"http://127.0.0.1:{prefill.port}", str(prefill.knobs["disaggregation_bootstrap_port"]),
            "--decode", f"http://127.0.0.1:{decode.port}", "--host", "127.0.0.1", "--port", str(port),
            *to_flags({**sglang_router_defaults(free_port), **router_args}, false_flags=False)]


def replica_router_command(rs: list[Role], port: int, router_args: dict, free_port) -> list[str]:
    from servelab.engines.commands import to_flags

    return [sys.executable, "-m", "sglang_router.launch_router",
            "--worker-urls", *(f"http://127.0.0.1:{r.port}" for r in rs), "--host", "127.0.0.1", "--port", str(port),
            *to_flags({**sglang_router_defaults(free_port), **router_args}, false_flags=False)]


def sglang_router_defaults(free_port) -> dict:
    # its Prometheus exporter binds 29000 by default (a second router on the node would
    # collide); it looks at the workers every 30 s by default, 30 s a start could wait
    return {"prometheus_port": free_port(), "worker_startup_check_interval": 1}
