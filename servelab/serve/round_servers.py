"""The servers of an experiment measured in rounds (servelab.serve.rounds): one per
configuration, launched (together, or each at its first turn), kept up across the rounds, and
what the idle ones take while another configuration's point runs."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import tempfile
import time
from pathlib import Path

from servelab.atomic import write_text
from servelab.engines import server_log
from servelab.serve import failure
from servelab.serve.conditions import process_table
from servelab.serve.launch import Launch, launch_plan, log, new_session_dir
from servelab.serve.server import ServerError
from servelab.serve.session import session_env, sidecars
from servelab.serve.session_spec import SessionSpec
from servelab.serve.store import PointStore


@dataclasses.dataclass
class Arm:
    """One configuration in the rounds: its spec, its launch once started, what it lacks."""
    spec: SessionSpec
    missing: list
    note: dict = dataclasses.field(default_factory=dict)   # its rounds' design, for its session's rounds.json
    launch: Launch | None = None
    done: list = dataclasses.field(default_factory=list)
    out: str | None = None   # why it measures no more (its server failed)
    warm: bool = False   # warmed at its own load (before its first turn's point)
    stack: contextlib.ExitStack | None = None   # its server's processes and sidecars


def start(arm: Arm, store: PointStore, hardware: dict, tmpdir: str, stack: contextlib.ExitStack) -> None:
    """The configuration's server up and healthy, kept running by `stack` (its own part of
    it, closed early where the server fails): launched, then ready."""
    launch_server(arm, store, hardware, tmpdir, stack, together=False)
    ready(arm)


def launch_server(arm: Arm, store: PointStore, hardware: dict, tmpdir: str, stack: contextlib.ExitStack,
                  together: bool) -> None:
    """The configuration's server processes started (not yet healthy); its rounds.json says
    when, and whether with the others (`together`)."""
    spec = arm.spec
    arm.stack = stack.enter_context(contextlib.ExitStack())
    name, session_dir = new_session_dir(spec)
    # a short name: the engine's IPC sockets live below it (a Unix socket's path: 107 bytes)
    arm_tmp = Path(tempfile.mkdtemp(prefix="arm", dir=tmpdir))
    env = session_env(spec, str(arm_tmp), session_dir)
    arm.launch = launch = Launch(spec, store, hardware, name, session_dir, str(arm_tmp), env)
    fleet, serve_cmd = launch_plan(spec, session_dir, env)
    write_text(session_dir / "command.txt", serve_cmd + "\n")
    write_text(session_dir / "rounds.json", json.dumps({**arm.note, "launched_at": time.time(),
                                                        "started": "together" if together else "in turn"}))
    launch.starting(fleet, serve_cmd)
    arm.stack.enter_context(fleet)
    log(f"{spec.experiment}/{spec.server_point}: {len(fleet.servers)} process(es) starting for the rounds, "
        f"client port {fleet.front.port} (logs in {session_dir})")


def ready(arm: Arm) -> None:
    """A launched server healthy, its facts read, its sidecars running."""
    spec, launch = arm.spec, arm.launch
    fleet = launch.fleet
    launch.use_client(lambda: launch.engine.client(*fleet.client_origin()))
    launch.healthy(fleet.wait_healthy(spec.startup_timeout_s, progress=log))
    origin = fleet.facts_from
    launch.learned(server_log.read_facts(origin.log, launch.engine, server_log.scrape_metrics(origin.base_url),
                                         server_log.scrape_info(origin.base_url, launch.engine.info_path)))
    arm.stack.enter_context(sidecars(spec, fleet, launch.session_dir))


def start_together(arms: list[Arm], store: PointStore, hardware: dict, tmpdir: str,
                   stack: contextlib.ExitStack) -> None:
    """Every configuration's server launched at once, then each waited for: the starts
    overlap (on a GPU box, 5 starts of 55-135 s each took 6 minutes one after another,
    h200_20261207_rounds). A server that fails to start fails its own points (data)."""
    todo = [a for a in arms if a.launch is None and a.missing and not a.out]
    log(f"starting {len(todo)} server(s) at once: {', '.join(a.spec.server_point for a in todo)}")
    launched = []
    for arm in todo:
        try:
            launch_server(arm, store, hardware, tmpdir, stack, together=True)
            launched.append(arm)
        except ServerError as exc:   # as a start at its turn would: its own points fail
            failed(arm, exc)
    for arm in launched:
        try:
            ready(arm)
        except ServerError as exc:
            failed(arm, exc)


def failed(arm: Arm, exc: ServerError) -> None:
    """Its server refused or died: its points not yet measured fail with the engine's reason
    (data), and its processes stop; a death with no cause of its own is transient and fails
    the job (a rerun measures what is left)."""
    launch = arm.launch
    stage = "server start-up" if launch.startup_s is None else "server exited under load"
    reason = failure.server_reason(exc.log_text(), exc.exit_code, exc.engine_died)
    lost = [p for p in arm.missing if p[0] not in arm.done]
    arm.stack.close()
    if reason is None:
        raise failure.TransientFault(f"{arm.spec.experiment}/{arm.spec.server_point}: its server stopped with no "
                                     f"reason of its own: transient, {len(lost)} point(s) left to a rerun. "
                                     f"Log: {exc.log}") from exc
    died = failure.PointFailed(stage, reason, exc.log, exc.exit_code)
    for point in lost:
        launch.save_failure(point, died)
        arm.done.append(point[0])
    arm.out = f"{stage}: {reason}"


# an idle server is quiet below this (a vLLM API server logs its stats each second); the most a
# turn waits for the others to get there
SETTLED_CORES, SETTLE_MOST_S = 0.02, 3.0


class IdleServers:
    """The CPU the other configurations' servers (every process of their groups) took while
    one configuration's point ran: what sitting idle costs the point measured beside them."""

    def __init__(self, arms: list[Arm]):
        self.pgids = {s.proc.pid for a in arms for s in a.launch.fleet.servers}
        self.settled_s = self.settle()
        self.start = (time.monotonic(), self.cpu_s())

    def settle(self, quiet_cores: float = SETTLED_CORES, most_s: float = SETTLE_MOST_S) -> float:
        """Wait, at most `most_s`, until the idle servers take under `quiet_cores` (a server
        goes on working for a moment after its turn's last request: its API server's and
        engine's tail took 0.2-0.3 of a core over the next 1 s point of week 11 without this)."""
        started = time.monotonic()
        while self.pgids and time.monotonic() - started < most_s:
            before, at = self.cpu_s(), time.monotonic()
            time.sleep(0.2)
            if (self.cpu_s() - before) / (time.monotonic() - at) < quiet_cores:
                break
        return round(time.monotonic() - started, 2)

    def cpu_s(self) -> float:
        return sum(cpu for _, pgid, cpu in process_table().values() if pgid in self.pgids)

    def cores(self) -> float | None:
        if not self.pgids:
            return None
        wall = time.monotonic() - self.start[0]
        return round((self.cpu_s() - self.start[1]) / wall, 4) if wall > 0 else None
