"""Where a session's time went (its `timing.json`, summed by servelab.run.timing at a run's
end): start-ups, warm-ups, client points, drift checks, stopping, and apart from its wall the
seconds it waited for GPUs, a compile key's cache and JIT builds."""

from __future__ import annotations

import json
import os
import socket
import time

from servelab.atomic import write_text
from servelab.serve.launch import Guest, Launch, log
from servelab.serve.server import note_event
from servelab.serve.session_spec import SessionSpec


def session_timing(spec: SessionSpec, launch: Launch, wall_s: float, shared: dict | None = None) -> dict:
    # the GPUs the job held (servelab.run.gpu_claims, or the scheduler's): a run's GPU-seconds
    gpus = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return {"experiment": spec.experiment, "server_point": spec.server_point, "kind": spec.kind,
            "wall_s": round(wall_s, 2), **{k: round(v, 2) for k, v in launch.timing.items()},
            **({"shared_engine": shared} if shared else {}),
            **({"gpu_wait_s": round(launch.gpu_wait_s, 2)} if round(launch.gpu_wait_s, 2) else {}),
            **({"jit_build_s": round(launch.jit_build_s, 2)} if round(launch.jit_build_s, 2) else {}),
            # of startup_s, the seconds its GPUs waited for FlashInfer's JIT builds (a fresh box)
            **({"startup_jit_s": round(launch.jit_s, 2)} if round(launch.jit_s, 2) and not shared else {}),
            # its start compiled (cold) or found its compile key cached (warm); waited for that
            **({"compile": "cold" if launch.gate.cold else "warm", "gate_wait_s": round(launch.gate_wait_s, 2)}
               if launch.gate is not None and not shared else {}),
            **({"gpus": gpus, "host": socket.gethostname()} if gpus else {})}


def write_timings(spec: SessionSpec, launch: Launch, hosted: list[Guest], run_started: float) -> None:
    """Each guest's part of the time as its own session's, then this session's: its wall
    less its guests', waiting for GPUs, for a compile key's cache and for JIT builds."""
    guest_wall = 0.0
    for guest in hosted:
        if guest.launch is not None:
            g = guest.launch
            wall = guest.wall_s or g.parts_s()   # offline: its points' (and any start's) time
            guest_wall += wall
            write_text(g.session_dir / "timing.json", json.dumps(session_timing(guest.spec, g, wall, g.shared_from)))
    timing = session_timing(spec, launch, time.monotonic() - run_started - guest_wall - launch.gpu_wait_s
                            - launch.gate_wait_s - launch.jit_build_s)
    write_text(launch.session_dir / "timing.json", json.dumps(timing))
    log(f"session wall {timing['wall_s']}s: start-up {timing['startup_s']}s, warm-up "
        f"{timing['warmup_s']}s, client points {timing['points_s']}s, stopping {timing['teardown_s']}s"
        + (f" (repeats after the first: {timing['repeats_s']}s)" if timing["repeats_s"] else "")
        + (f"; its guests' points {guest_wall:.1f}s more" if hosted else ""))
    note_event(f"measured\t{os.getpid()}\t{timing['warmup_s'] + timing['points_s'] + guest_wall:.2f}")
