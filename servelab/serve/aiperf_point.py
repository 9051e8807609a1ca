"""A load point sent by AIPerf against a session's server (servelab.engines.clients.aiperf):
multi-turn conversations, or the two-client check. measurement.run_bench hands it such points."""

from __future__ import annotations

from pathlib import Path

from servelab.engines.clients import aiperf as aiperf_client
from servelab.serve import failure


def measure(launch, knobs: dict, raw_dir: Path):
    """One load point through AIPerf against the session's server (measurement.run_bench's
    counterpart): its argv and its result in vLLM's keys; AIPerf's own error fails the point."""
    spec = launch.spec
    out_dir = Path(raw_dir) / "aiperf"
    argv = aiperf_client.args(spec.served_name, spec.model_path, launch.fleet.front.port, knobs, str(out_dir))
    log = launch.session_dir / "aiperf.log"
    try:
        aiperf_client.run(argv, log)
        return [aiperf_client.executable(), "profile", *argv], aiperf_client.result(out_dir)
    except Exception as exc:
        launch.fleet.check_alive("during an AIPerf point")
        raise failure.PointFailed("aiperf", f"{type(exc).__name__}: {exc}", log) from exc
