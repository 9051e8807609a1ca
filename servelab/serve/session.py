"""One server point: launch its server once, measure the client points it lacks.

    identities -> store lookup -> (nothing missing: no launch)
    -> free port -> launch (own process group) -> import the bench client while
    the server starts -> /health with a deadline -> warm-up at the shapes it will
    measure -> each missing client point (prefix cache reset before it, the engine's
    counters and outside load around it), every repeat -> the first point again
    (drift) -> teardown of the whole process tree in every exit path -> view of all points
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from servelab.engines import commands, environment, lm_eval_client, offline_plan, prestart
from servelab.serve import conditions, failure, monitors, server_log, topology
from servelab.serve.load_search import SearchPoints
from servelab.run import caches, provenance
from servelab.run.gpu_slots import JobGpus
from servelab.fetch import model_facts
from servelab.engines.registry import ENGINES
from servelab.atomic import write_text
from servelab.config.experiments import EVAL_KNOB, RESTART_KNOB, bench_knobs, gpus_needed, point_id
from servelab.serve.peak_memory import PeakMemory
from servelab.serve.server import Server, ServerError, free_port, log_tail, terminate_on_sigterm
from servelab.serve.store import PointStore, identity_hash


MEASUREMENT_DEFAULTS = {"repeats": 1, "warmup_prompts": 8, "reset_prefix_cache": True, "drift_check": True}


@dataclass
class SessionSpec:
    experiment: str
    server_point: str
    engine: str
    model_path: str
    model_identity: str          # hub repo@revision, or the tiny recipe's hash
    dataset_name: str            # `sharegpt` (a file) or one of the client's built-in generators
    dataset_path: str | None
    dataset_identity: str
    server_knobs: dict
    client_points: list[dict]
    store_dir: str
    startup_timeout_s: float = 1800.0
    kind: str = "serve"          # serve, or offline (vllm bench throughput/latency, hf static batching)
    tool: str | None = None
    env: dict = field(default_factory=dict)
    config_hash: str = ""
    workflow_dir: str = "."
    eval_include_path: str | None = None   # a local lm-eval task directory (servelab.fetch.eval_task)
    topology: dict | None = None           # P/D roles and router (servelab.serve.topology)
    monitors: dict = field(default_factory=dict)  # servelab.serve.monitors: metrics, gpu, torch_profile, wrap
    identity_env: dict = field(default_factory=dict)  # the experiment's and the point's env (not the engine's)
    # how each point is measured: repeats, warmup_prompts, reset_prefix_cache, drift_check
    measurement: dict = field(default_factory=dict)
    # a search session: {knob, low, high, steps, slo}; its load points are bisected
    # (servelab.serve.load_search) from the first client point, not listed
    load_search: dict | None = None
    # the name its points address the server by, when they run on another experiment's
    # engine (servelab.config.engine_groups)
    served_as: str | None = None

    def setting(self, key: str):
        return {**MEASUREMENT_DEFAULTS, **self.measurement}[key]

    @property
    def warmup_prompts(self) -> int:
        """Requests that warm the engine before a measurement: a session's warm-up for a
        server; `vllm bench throughput`'s own `--num-warmups` before each offline
        throughput point (`vllm bench latency` warms itself: --num-iters-warmup)."""
        return self.setting("warmup_prompts") if self.kind == "serve" or self.tool == "throughput" else 0

    @property
    def resets_prefix_cache(self) -> bool:
        return self.kind == "serve" and bool(self.setting("reset_prefix_cache")) and \
            ENGINES[self.engine].reset_cache_path is not None

    @property
    def served_name(self) -> str:
        return self.served_as or f"servelab-{self.experiment}"


def log(msg: str) -> None:
    print(f"[servelab {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def point_identity(spec: SessionSpec, client: dict, engine_version: str | None, hardware: dict,
                   repeat: int = 0) -> dict:
    """Everything that decides a measurement's value, and nothing incidental (ports, paths).
    Repeat k > 0 of a point is a point of its own: raising `repeats` measures only the new ones."""
    measured_as = {"warmup_prompts": spec.warmup_prompts, "reset_prefix_cache": spec.resets_prefix_cache}
    return {
        "engine": spec.engine,
        "engine_version": engine_version,
        "model": spec.model_identity,
        "dataset": spec.dataset_identity,
        **({"kind": f"offline:{spec.tool}"} if spec.kind == "offline" else {}),
        **({"topology": spec.topology} if spec.topology else {}),
        **({"monitors": spec.monitors} if spec.monitors else {}),
        **({"env": spec.identity_env} if spec.identity_env else {}),
        "server": spec.server_knobs,
        "client": client,
        "hardware": hardware,
        **({"measurement": measured_as} if spec.kind == "serve" else {}),
        **({"measurement": {"warmup_prompts": spec.warmup_prompts}} if spec.kind == "offline" and spec.warmup_prompts
           else {}),
        **({"repeat": repeat} if repeat else {}),
    }


# Snakemake sets these to the job's thread count; vLLM's CPU backend binds its own
# OpenMP threads per core, and an inherited OMP_NUM_THREADS oversubscribes that
# core (measured: ITL p50 2.6 ms without, 134 ms with OMP_NUM_THREADS=2 on 2 cores).
THREAD_COUNT_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                     "GOTO_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def server_env(spec: SessionSpec, tmpdir: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in THREAD_COUNT_VARS}
    env.update({k: str(v) for k, v in spec.env.items()})
    env["TMPDIR"] = tmpdir
    # the server runs `python -m servelab.engines.vllm_cli`: make the package importable
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def engine_cache_env(engine: str, cache_root: str | Path, env: dict | None = None) -> dict[str, str]:
    """Engine caches under the workflow's cache directory, keyed by engine release, torch
    and device (servelab.run.caches): a next start of a shape on the same stack skips its
    compilation, and no other stack ever reads its entries."""
    device = (provenance.gpu_models() or [provenance.cpu_model()])[0]
    key = caches.stack_key(engine, environment.installed_version(ENGINES[engine].distributions, env),
                           environment.installed_version(("torch",), env), device)
    return caches.cache_env(cache_root, key)


def new_session_dir(spec: SessionSpec) -> tuple[str, Path]:
    """Where a session keeps its logs and commands, beside the points it measures."""
    name = f"{spec.server_point}-{time.strftime('%Y%m%dT%H%M%S')}"
    path = Path(spec.store_dir) / "sessions" / name
    path.mkdir(parents=True, exist_ok=True)
    return name, path


class Fleet:
    """The processes of one server point, front (what the client talks to) last:
    started in order, healthy in order, all torn down on exit."""

    def __init__(self, servers: list[Server], facts_from: Server):
        self.servers = servers
        self.front = servers[-1]
        self.facts_from = facts_from
        self.stack = contextlib.ExitStack()

    def __enter__(self) -> "Fleet":
        with self.stack:
            for server in self.servers:
                self.stack.enter_context(server)
            self.stack = self.stack.pop_all()
        return self

    def __exit__(self, *exc) -> None:
        self.stack.close()

    def wait_healthy(self, timeout_s: float, progress) -> float:
        for server in self.servers:
            server.wait_healthy(timeout_s, progress)
        return time.monotonic() - self.servers[0].started_at

    def check_alive(self, during: str) -> None:
        for server in self.servers:
            server.check_alive(during if len(self.servers) == 1 else f"({server.log.stem}) {during}")


def engine_signs(engine) -> dict:
    """What tells a server that its engine died (servelab.serve.server.Server.engine_death)."""
    return {"fatal_lines": engine.fatal_lines, "engine_processes": engine.engine_processes}


def launch_plan(spec: SessionSpec, session_dir: Path, env: dict, gated: bool = False) -> tuple[Fleet, str]:
    """The processes of the server point and the command lines to record; `gated`: its one
    server is pre-started (servelab.engines.prestart), to be granted its GPUs (hold_gpus)."""
    engine = ENGINES[spec.engine]
    knobs = {**spec.server_knobs, **monitors.profiler_knobs(spec.monitors, session_dir)}
    wrap = spec.monitors.get("wrap")
    if not spec.topology:
        port = free_port()
        cmd = monitors.wrap_command(engine.serve_command(spec.model_path, port, knobs, spec.served_name),
                                    wrap, session_dir)
        server = Server(cmd, port, session_dir / "server.log", env=env, gated=gated, **engine_signs(engine))
        return Fleet([server], server), commands.shell_line(cmd)
    rs = topology.roles(knobs, spec.topology)
    topology.assign_ports(spec.engine, rs, free_port)
    devices = topology.split_devices(env.get("CUDA_VISIBLE_DEVICES"), [gpus_needed(r.knobs) for r in rs])
    servers, lines = [], []
    for role, visible in zip(rs, devices):
        cmd = monitors.wrap_command(engine.serve_command(spec.model_path, role.port, role.knobs, spec.served_name),
                                    wrap, session_dir)
        role_env = {**env, **role.env, **({"CUDA_VISIBLE_DEVICES": visible} if visible else {})}
        servers.append(Server(cmd, role.port, session_dir / f"{role.name}.log", env=role_env,
                              **engine_signs(engine)))
        lines.append(f"# {role.name}\n{commands.shell_line(cmd)}")
    front_port = free_port()
    router = topology.router_command(spec.engine, rs, front_port, spec.topology.get("router", {}).get("args", {}))
    servers.append(Server(router, front_port, session_dir / "router.log", env=env))
    lines.append(f"# router\n{commands.shell_line(router)}")
    return Fleet(servers, facts_from=servers[1]), "\n".join(lines)


@dataclass
class Launch:
    """What the points of one session share: the spec, the store, the machine, the
    session's directory and, once started, the fleet and its start-up facts."""
    spec: SessionSpec
    store: PointStore
    hardware: dict
    session_name: str
    session_dir: Path
    tmpdir: str
    env: dict
    client: object = None
    fleet: Fleet | None = None
    serve_cmd: str = ""
    startup_s: float | None = None
    facts: dict = field(default_factory=dict)

    @property
    def engine(self):
        return ENGINES[self.spec.engine]

    warmup: dict | None = None
    gpus: JobGpus | None = None   # claimed once its pre-started processes have imported (hold_gpus)
    gpu_wait_s: float = 0.0
    shared_from: dict | None = None   # on another experiment's engine: its experiment, point, session
    offline_reasons: dict = field(default_factory=dict)   # runner error -> the engine's own reason
    # where the session's time went: server start-ups, warm-ups, client points (seconds), and
    # of the points' seconds, those of repeats after the first (what `repeats` costs)
    timing: dict = field(default_factory=lambda: {"startup_s": 0.0, "warmup_s": 0.0, "points_s": 0.0,
                                                  "drift_s": 0.0, "repeats_s": 0.0})

    def point_name(self, knobs: dict, identity: dict | None = None) -> str:
        name = "lm_eval" if EVAL_KNOB in knobs else point_id(knobs_swept(knobs, self.spec))
        repeats = self.spec.setting("repeats")
        repeat = (identity or {}).get("repeat", 0)
        return f"{name} (repeat {repeat + 1}/{repeats})" if repeats > 1 and EVAL_KNOB not in knobs else name

    def record(self, key: str, identity: dict, knobs: dict, client_command: str, wall_s: float | None,
               extra: dict | None = None) -> dict:
        return {**point_record(self.spec, key, identity, knobs, self.session_name, self.hardware,
                               self.engine.distributions, self.serve_cmd, client_command, self.startup_s,
                               wall_s, self.facts),
                "repeat": identity.get("repeat", 0), "warmup": self.warmup,
                **({"shared_engine": self.shared_from} if self.shared_from else {}), **(extra or {})}

    def save_failure(self, point: tuple[str, dict, dict], failure: "failure.PointFailed") -> None:
        key, knobs, identity = point
        self.store.save(key, self.record(key, identity, knobs, "", None, {"failure": failure.as_record()}), {})
        log(f"{self.point_name(knobs)}: FAILED ({failure.stage}) {failure.reason}")


@dataclass
class Guest:
    """Another experiment's session on this session's engine (servelab.config.engine_groups):
    its spec, store and missing points; its launch once it has one."""
    spec: SessionSpec
    store: PointStore
    missing: list
    launch: Launch | None = None
    done: list = field(default_factory=list)
    wall_s: float = 0.0


def guest_launch(host: Launch, guest: Guest) -> Launch:
    """The guest's side of the host's running engine: a session directory of its own in
    its store (saying whose engine it used), its own temporary files and client name."""
    if guest.launch is None:
        name, path = new_session_dir(guest.spec)
        tmp = Path(host.tmpdir) / f"guest-{guest.spec.experiment}-{guest.spec.server_point}"
        tmp.mkdir()
        shared = {"experiment": host.spec.experiment, "server_point": host.spec.server_point,
                  "session": host.session_name}
        write_text(path / "shared_engine.json", json.dumps({**shared, "session_dir": str(host.session_dir)}))
        if host.serve_cmd:   # a server's (offline points record their own standalone command)
            write_text(path / "command.txt", host.serve_cmd + "\n")
        guest.launch = Launch(dataclasses.replace(guest.spec, served_as=host.spec.served_name), guest.store,
                              host.hardware, name, path, str(tmp), host.env, client=host.client,
                              fleet=host.fleet, serve_cmd=host.serve_cmd, startup_s=host.startup_s,
                              facts=host.facts, shared_from=shared)
    return guest.launch


def measure_guest(host: Launch, guest: Guest) -> None:
    """A guest's missing points on the host's running server, measured as its own session
    would: its warm-up at its shapes, its client, the prefix cache reset, its drift check."""
    launch = guest_launch(host, guest)
    started = time.monotonic()
    log(f"{guest.spec.experiment}/{guest.spec.server_point} on this engine: {len(guest.missing)} point(s)")
    try:
        launch.warmup = warm_up(launch, first_load(guest.missing), launch.session_dir)
        measure_points(launch, guest.missing, guest.done)
        if guest.spec.setting("drift_check"):
            check_drift(launch, guest.missing, guest.done)
    finally:
        guest.wall_s = time.monotonic() - started


def measure(launch: Launch, missing: list[tuple[str, dict, dict]], guests: list[Guest] = ()) -> None:
    """Launch the server point and measure `missing` [(key, client knobs, identity)], then
    its guests' missing points; points with `restart: k` are measured after the k-th
    restart (a fresh fleet, same session directory: what the server left on disk
    survives, its memory does not). A server that refuses its configuration, or exits
    with an error, fails the points it was to measure (kept as data); one killed by a
    signal fails the job."""
    spec = launch.spec
    for restart, group in restart_passes(missing) or [(0, [])]:
        launch_dir = launch.session_dir if restart == 0 else launch.session_dir / f"restart{restart}"
        launch_dir.mkdir(exist_ok=True)
        fleet, launch.serve_cmd = launch_plan(spec, launch_dir, launch.env, gated=launch.gpus is not None)
        write_text(launch_dir / "command.txt", launch.serve_cmd + "\n")
        launch.fleet, launch.startup_s, launch.facts = fleet, None, {}
        done: list[str] = []
        try:
            with fleet:
                log(f"{spec.experiment}/{spec.server_point}: {len(fleet.servers)} process(es) starting"
                    f"{f' (restart {restart})' if restart else ''}, client port {fleet.front.port} "
                    f"(logs in {launch_dir})")
                hold_gpus(launch, fleet.servers)
                # imported while the server loads; a client of its own runs in the engine's env
                launch.client = launch.client or launch.engine.client(launch.env)
                launch.startup_s = fleet.wait_healthy(spec.startup_timeout_s, progress=log)
                launch.timing["startup_s"] += launch.startup_s
                log(f"server healthy after {launch.startup_s:.1f}s; measuring {len(group)} point(s)")
                launch.facts = {**server_log.read_facts(fleet.facts_from.log,
                                                        server_log.scrape_metrics(fleet.facts_from.base_url)),
                                **server_log.scrape_server_info(fleet.facts_from.base_url, launch.engine.info_path)}
                with sidecars(spec, fleet, launch_dir):
                    launch.warmup = warm_up(launch, first_load(group), launch_dir)
                    measure_points(launch, group, done)
                    if restart == 0 and spec.setting("drift_check"):
                        check_drift(launch, group.visited if isinstance(group, SearchPoints) else group, done)
                if restart == 0:
                    for guest in guests:
                        measure_guest(launch, guest)
        except ServerError as exc:
            # an engine that died on its own is data (its front exiting or hanging after it);
            # a front killed by a signal (time limit, OOM killer, Ctrl-C) is transient
            died_on_its_own = exc.engine_died and (exc.exit_code is None or exc.exit_code >= 0)
            if not (died_on_its_own or failure.is_deterministic(exc.exit_code)):
                raise
            stage = "server start-up" if launch.startup_s is None else "server exited under load"
            fallback = exc.engine_died or f"server exited with code {exc.exit_code}"
            reason = failure.log_reason(exc.log, fallback)
            if exc.engine_died and exc.engine_died not in reason:
                reason = f"{reason} ({exc.engine_died})"
            died = failure.PointFailed(stage, reason, exc.log, exc.exit_code)
            for point in group:
                if point[0] not in done:
                    launch.save_failure(point, died)
            for guest in guests if restart == 0 else ():   # the same engine: the same fate
                for point in guest.missing:
                    if point[0] not in guest.done:
                        guest_launch(launch, guest).save_failure(point, died)


def fail_all(launch: Launch, missing, guests: list[Guest], why: "failure.PointFailed") -> None:
    """Every point the session (and its guests) would measure, failed for one reason."""
    for point in missing:
        launch.save_failure(point, why)
    for guest in guests:
        for point in guest.missing:
            guest_launch(launch, guest).save_failure(point, why)


def prestarts(spec: SessionSpec, gpus: JobGpus | None) -> bool:
    """Whether the session's engine starts before the job holds its GPUs
    (servelab.engines.prestart): one vLLM process, no profiler wrapping it, on a machine
    where the job claims its GPUs itself and has not yet."""
    return bool(gpus is not None and gpus.deferrable and spec.engine == "vllm" and not spec.topology
                and not spec.monitors.get("wrap"))


def hold_gpus(launch: Launch, processes: list[Server]) -> None:
    """A pre-started session's turn on its GPUs: at once where they are free (its start-up
    then counts from its launch, imports included); else once its processes have imported,
    waiting for the GPUs (its start-up then counts from the grant: the imports ran while
    another job used them). Then its processes go on, on them."""
    if launch.gpus is None:
        return
    if not launch.gpus.take_if_free():
        for process in processes:
            process.wait_for_line(prestart.IMPORTED)
        waiting = time.monotonic()
        launch.gpus.take()
        launch.gpu_wait_s += time.monotonic() - waiting
        log(f"waited {launch.gpu_wait_s:.1f}s for GPU(s) with the engine imported; "
            f"its start-up counts from here")
    devices = launch.gpus.take()
    launch.env["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
    for process in processes:
        process.grant(devices)


def restart_passes(missing) -> list[tuple[int, list]]:
    """[(restart k, the points measured after the k-th restart)]; a search's bisected
    points are all measured on the first server."""
    if isinstance(missing, SearchPoints):
        return [(0, missing)]
    passes = sorted({knobs.get(RESTART_KNOB, 0) for _, knobs, _ in missing})
    return [(k, [m for m in missing if m[1].get(RESTART_KNOB, 0) == k]) for k in passes]


def first_load(group) -> dict | None:
    """The client knobs of the first load point a pass measures (not lm-eval's)."""
    if isinstance(group, SearchPoints):
        return group.first_knobs
    return next((knobs for _, knobs, _ in group if EVAL_KNOB not in knobs), None)


def sidecars(spec: SessionSpec, fleet: Fleet, out_dir: Path) -> contextlib.ExitStack:
    stack = contextlib.ExitStack()
    if "metrics" in spec.monitors:
        stack.enter_context(monitors.MetricsScraper(fleet.facts_from.base_url + "/metrics",
                                                    out_dir / "metrics.csv",
                                                    spec.monitors["metrics"].get("interval_s", 1.0)))
    if "gpu" in spec.monitors:
        stack.enter_context(monitors.GpuMonitor(out_dir / "gpu.csv", spec.monitors["gpu"].get("interval_ms", 500)))
    return stack


def warm_up(launch: Launch, first: dict | None, out_dir: Path) -> dict | None:
    """Requests at the shapes the session will measure (the first load point's workload,
    all at once, another seed) before its first measured point, so that no point absorbs
    the engine's cold start (kernel and graph caches, allocator). Kept in warmup.json."""
    spec = launch.spec
    if not spec.warmup_prompts or first is None:
        return None
    knobs = {**bench_knobs(first), "num_prompts": spec.warmup_prompts, "request_rate": "inf",
             "seed": int(first.get("seed") or 0) + 1}
    raw_dir = Path(launch.tmpdir) / "warmup"
    raw_dir.mkdir(exist_ok=True)
    started = time.monotonic()
    argv = launch.engine.client_args(spec.model_path, spec.served_name, launch.fleet.front.port,
                                     spec.dataset_name, spec.dataset_path, knobs, raw_dir)
    try:
        launch.client.run(argv, out_dir / "warmup.log")
        result = launch.engine.read_result(raw_dir)
    except Exception as exc:  # a point that fails will say why; the warm-up only notes it
        launch.fleet.check_alive("during the warm-up")
        log(f"warm-up failed ({type(exc).__name__}: {exc}); measuring anyway")
        return {"num_prompts": spec.warmup_prompts, "failed": f"{type(exc).__name__}: {exc}"}
    write_text(out_dir / "warmup.json", json.dumps(result, default=str))
    warmup = {"num_prompts": spec.warmup_prompts, "completed": result.get("completed"),
              "duration_s": round(time.monotonic() - started, 2)}
    launch.timing["warmup_s"] += warmup["duration_s"]
    log(f"warm-up: {warmup['completed']}/{spec.warmup_prompts} requests in {warmup['duration_s']}s")
    return warmup


def reset_cache(launch: Launch) -> bool | None:
    if not launch.spec.resets_prefix_cache:
        return None
    # the engines hold the cache, not a router in front of them
    servers = launch.fleet.servers[:-1] if len(launch.fleet.servers) > 1 else launch.fleet.servers
    return conditions.reset_prefix_cache([s.base_url for s in servers], launch.engine.reset_cache_path)


def measure_points(launch: Launch, missing: list[tuple[str, dict, dict]], done: list[str]) -> None:
    """Each missing client point against the running fleet, saved as it completes
    (its key then appended to `done`); a client's own error fails that point only."""
    for n, (key, knobs, identity) in enumerate(missing, 1):
        name = launch.point_name(knobs, identity)
        raw_dir = Path(launch.tmpdir) / key
        raw_dir.mkdir()
        measure_point = run_eval if EVAL_KNOB in knobs else run_bench
        cache_reset = reset_cache(launch)
        started = time.monotonic()
        pgids = [server.proc.pid for server in launch.fleet.servers]
        try:
            with PeakMemory(pgids, launch.env) as memory, \
                    conditions.EngineCounters(launch.fleet.facts_from.base_url + "/metrics") as counters, \
                    conditions.OutsideLoad(pgids, launch.env) as outside:
                argv, result = measure_point(launch, knobs, raw_dir)
        except failure.PointFailed as failed:
            launch.save_failure((key, knobs, identity), failed)
            done.append(key)
            continue
        launch.fleet.check_alive(f"during client point {name}")
        wall_s = time.monotonic() - started
        launch.timing["points_s"] += wall_s
        launch.timing["repeats_s"] += wall_s if identity.get("repeat") else 0.0
        record = launch.record(key, identity, knobs, commands.shell_line(argv), wall_s,
                               {**memory.result(), "prefix_cache_reset": cache_reset,
                                "counters": counters.result(), "outside": outside.result()})
        (raw_dir / "result.json").write_text(json.dumps(result))
        launch.store.save(key, record, {"bench.json": raw_dir / "result.json"})
        done.append(key)
        log(f"[{n}/{len(missing)}] {name}: measured in {wall_s:.1f}s")


def check_drift(launch: Launch, group: list[tuple[str, dict, dict]], done: list[str]) -> None:
    """The session's first load point measured again at its end: how far its numbers moved
    while the session ran (thermal or clock changes, a cache filling, a neighbour). Every
    point the session measured records it; the point itself is not stored twice."""
    measured = [(key, knobs) for key, knobs, _ in group if key in done and EVAL_KNOB not in knobs]
    if len(measured) < 2 or launch.store.load(measured[0][0]).get("failure"):
        return
    key, knobs = measured[0]
    raw_dir = Path(launch.tmpdir) / "drift"
    raw_dir.mkdir(exist_ok=True)
    reset_cache(launch)
    started = time.monotonic()
    try:
        _, again = run_bench(launch, knobs, raw_dir)
    except failure.PointFailed as failed:
        log(f"drift check: the first point failed when measured again ({failed.reason})")
        return
    finally:
        launch.timing["drift_s"] += time.monotonic() - started
    first = json.loads((launch.store.path(key) / "bench.json").read_text())
    drift = {"point": launch.point_name(knobs), **drift_of(first, again)}
    write_text(launch.session_dir / "drift.json", json.dumps({"first": first, "again": again}, default=str))
    log(f"drift check ({drift['point']} measured again): " +
        ", ".join(f"{k} {v:+.1%}" for k, v in drift.items() if isinstance(v, float)))
    for done_key in done:
        if launch.store.has(done_key):
            launch.store.annotate(done_key, {"drift": drift})


DRIFT_METRICS = ("p50_ttft_ms", "p50_itl_ms", "output_throughput")


def drift_of(first: dict, again: dict) -> dict:
    """Relative change of each drift metric, from the first measurement to the second."""
    return {m: (again[m] - first[m]) / first[m] for m in DRIFT_METRICS
            if isinstance(first.get(m), (int, float)) and isinstance(again.get(m), (int, float)) and first[m]}


def run_bench(launch: Launch, knobs: dict, raw_dir: Path):
    """One load point with the engine's benchmark client; its saved result in one
    layout whatever the engine."""
    spec, engine = launch.spec, launch.engine
    # the torch profiler is started and stopped by the client around its run
    client_knobs = {**bench_knobs(knobs), **({"profile": True} if "torch_profile" in spec.monitors else {})}
    argv = engine.client_args(spec.model_path, spec.served_name, launch.fleet.front.port, spec.dataset_name,
                              spec.dataset_path, client_knobs, raw_dir)
    bench_log = launch.session_dir / "bench.log"
    try:
        launch.client.run(argv, bench_log)
    except Exception as exc:
        launch.fleet.check_alive(f"during client point {launch.point_name(knobs)}")
        # the server is up: the client's own error (kept), e.g. a request the server rejects
        raise failure.PointFailed("benchmark client", f"{type(exc).__name__}: {exc}", bench_log) from exc
    return argv, engine.read_result(raw_dir)


def run_eval(launch: Launch, knobs: dict, raw_dir: Path):
    """lm-eval's tasks against the running server (week 12 accuracy)."""
    spec = launch.spec
    cmd = lm_eval_client.command(knobs[EVAL_KNOB], spec.served_name, launch.fleet.front.port, spec.model_path,
                                 str(raw_dir), spec.eval_include_path)
    log_path = launch.session_dir / "lm_eval.log"
    log(f"lm-eval {','.join(knobs[EVAL_KNOB]['tasks'])} against the server (log {log_path})")
    with open(log_path, "a") as out:
        out.write(f"$ {commands.shell_line(cmd)}\n")
        out.flush()
        code = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=server_env(spec, launch.tmpdir),
                              cwd=raw_dir).returncode
    if code != 0:
        launch.fleet.check_alive("during lm-eval")
        if not failure.is_deterministic(code):
            raise RuntimeError(f"lm-eval killed (exit code {code}); log: {log_path}\n{log_tail(log_path)}")
        raise failure.PointFailed("lm-eval", failure.log_reason(log_path, f"lm-eval exited with code {code}"),
                                  log_path, code)
    return cmd, lm_eval_client.newest_results(raw_dir)


def point_record(spec: SessionSpec, key: str, identity: dict, knobs: dict, session_name: str,
                 hardware: dict, distributions: tuple, command: str, client_command: str,
                 startup_s: float | None, wall_s: float | None, facts: dict) -> dict:
    return {
        "key": key,
        "identity": identity,
        "experiment": spec.experiment,
        "server_point": spec.server_point,
        "client_knobs": knobs,
        "session": session_name,
        "server_startup_s": startup_s,
        "client_wall_s": wall_s,
        "server_facts": facts,   # KV cache size, weight memory (servelab.serve.server_log)
        "model_size": model_facts.model_size(spec.model_path),
        "provenance": {
            "serve_command": command,
            # what servelab set in the engine's environment (engine, experiment and point
            # `env`): e.g. the GPU check's VLLM_WORKER_MULTIPROC_METHOD, which its start-ups show
            "server_env": {k: str(v) for k, v in spec.env.items()},
            "bench_args": client_command,
            "python": sys.version.split()[0],
            "packages": {p: environment.installed_version((p,), spec.env)
                         for p in (*distributions, "torch", "transformers")},
            "hardware": hardware,
            "job_env": provenance.job_environment(),
            "config_hash": spec.config_hash,
            "git_commit": provenance.git_commit(spec.workflow_dir),
        },
    }


def offline_batches(spec: SessionSpec, missing: list) -> list[list]:
    """The runner processes of a session's offline points: one for all of them (an engine
    per engine configuration), or one per point under a wrapping profiler (nsys, ncu),
    whose report is then that point's alone."""
    return [[m] for m in missing] if spec.monitors.get("wrap") else [missing]


def measure_offline(launch: Launch, missing: list[tuple[str, dict, dict]], guests: list[Guest] = ()) -> None:
    """The offline benchmark of every missing point (`vllm bench throughput|latency`,
    servelab.engines.hf_static), then of its guests' missing points, run by the engine's
    plan runner (servelab.engines.offline_plan): the engine is built once per engine
    configuration, not once per point, and lives in the runner's process, run in its
    own process group and torn down like a server. A point that raises fails alone
    (kept); a runner that exits with an error fails the points it did not report; one
    killed by a signal fails the job."""
    spec, engine, session_dir = launch.spec, launch.engine, launch.session_dir
    engine_knobs = {**spec.server_knobs, **monitors.profiler_knobs(spec.monitors, session_dir)}
    # (the launch it belongs to, the point) in plan order; a guest's on the host's engine after the host's
    owned = [[(launch, m) for m in batch] for batch in offline_batches(spec, missing)] or [[]]
    owned[-1] += [(guest_launch(launch, g), m) for g in guests for m in g.missing]
    total = sum(len(batch) for batch in owned)
    done = 0
    for b, batch in enumerate(owned):
        points: dict[str, tuple] = {}
        for n, (owner, (key, knobs, identity)) in enumerate(batch):
            raw = Path(owner.tmpdir) / f"{key}.json"
            client_knobs = {**offline_warmup(owner.spec, knobs), **bench_knobs(knobs),
                            **({"profile": True} if "torch_profile" in spec.monitors else {})}
            args = (spec.tool, spec.model_path, engine_knobs, client_knobs, owner.spec.dataset_name,
                    owner.spec.dataset_path, str(raw))
            # a plan's keys are unique: two experiments may measure the same point
            plan_key = key if owner is launch else f"{key}-{owner.spec.experiment}-{n}"
            points[plan_key] = (owner, key, knobs, identity, raw, engine.offline_args(*args),
                                engine.offline_command(*args))
        tag = "" if len(owned) == 1 else "-" + offline_file_name(batch[0][1][1], batch[0][1][2], spec)
        plan, status = Path(launch.tmpdir) / f"plan{b}.json", Path(launch.tmpdir) / f"status{b}.jsonl"
        offline_plan.write_plan(plan, [(plan_key, p[5]) for plan_key, p in points.items()])
        cmd = monitors.wrap_command(engine.offline_plan_command(spec.tool, str(plan), str(status)),
                                    spec.monitors.get("wrap"), session_dir)
        runner = Server(cmd, 0, session_dir / f"{spec.tool}{tag}.log", env=launch.env,
                        gated=launch.gpus is not None)
        gpu = (monitors.GpuMonitor(session_dir / f"gpu{tag}.csv", spec.monitors["gpu"].get("interval_ms", 500))
               if "gpu" in spec.monitors else contextlib.nullcontext())
        reported: set[str] = set()
        # load from outside over each point (from the last report to this one; the first
        # point's window holds the engine start): jobs beside it on the host slow it too
        with runner:
            hold_gpus(launch, [runner])   # a pre-started runner's turn on the GPU
            with gpu, PeakMemory([runner.proc.pid], launch.env) as memory, \
                    conditions.OutsideLoad([runner.proc.pid], launch.env) as outside:
                log(f"{len(points)} point(s) in one {spec.engine} {spec.tool} process (log {runner.log})")
                while True:
                    code = runner.proc.poll()   # before reading: all it wrote before exiting is read
                    for outcome in offline_plan.read_status(status):
                        if outcome["key"] not in reported:
                            reported.add(outcome["key"])
                            done += 1
                            record_offline(points[outcome["key"]], outcome, runner, cmd,
                                           {**memory.result(), "outside": outside.lap()}, f"[{done}/{total}]")
                            memory.reset()
                    # all reported: stop it now (a profiler wrapping it must see it exit on its own)
                    if code is not None or (len(reported) == len(points) and not spec.monitors.get("wrap")):
                        break
                    time.sleep(0.5)
        unreported = [plan_key for plan_key in points if plan_key not in reported]
        if unreported:
            message = f"{spec.engine} {spec.tool} exited with code {code} before {len(unreported)} point(s); " \
                      f"log: {runner.log}"
            if not failure.is_deterministic(code):
                raise RuntimeError(f"{message}\n{log_tail(runner.log)}")
            for plan_key in unreported:
                owner, key, knobs, identity = points[plan_key][:4]
                owner.save_failure((key, knobs, identity), failure.PointFailed(
                    f"{spec.tool} benchmark", failure.log_reason(runner.log, message), runner.log, code))


def offline_reason(log_path: Path, key: str, error: str, seen: dict[str, str]) -> str:
    """The engine's own reason for a failed point, from the point's part of the runner's log
    (its engine's processes log the root cause there, not in the exception). A point whose
    engine configuration already failed to start gets that first point's reason."""
    if error in seen:
        return seen[error]
    text = log_tail(log_path, lines=100_000)
    part = text[text.find(f"{offline_plan.POINT_MARK}{key}"):] if f"{offline_plan.POINT_MARK}{key}" in text else ""
    seen[error] = failure.engine_reason(part) or error
    return seen[error]


def offline_warmup(spec: SessionSpec, knobs: dict) -> dict:
    """The benchmark's own warm-up of an offline point (unless the point sets it): a point
    then measures a warm engine whether it runs first on a new engine or after others."""
    if spec.tool == "throughput" and spec.warmup_prompts and "num_warmups" not in knobs:
        return {"num_warmups": spec.warmup_prompts}
    return {}


def offline_file_name(knobs: dict, identity: dict, spec: SessionSpec) -> str:
    return point_id(knobs_swept(knobs, spec)) + (f"-repeat{identity['repeat']}" if "repeat" in identity else "")


def record_offline(point: tuple, outcome: dict, runner: Server, runner_cmd: list[str], measured: dict,
                   progress: str) -> None:
    """Store one point the runner reported, in the store of the session it belongs to: its
    engine start (when it paid one) is that session's start-up time, its benchmark the
    point's time; `measured`: its peak memory and the load from outside over it."""
    launch, key, knobs, identity, raw, _, standalone = point
    spec = launch.spec
    engine_start_s = outcome.get("engine_start_s", 0.0)
    if engine_start_s:
        launch.startup_s = engine_start_s
        launch.timing["startup_s"] += engine_start_s
    launch.facts = server_log.read_facts(runner.log)
    launch.serve_cmd = commands.shell_line(standalone)   # what reproduces this point on its own
    name = launch.point_name(knobs, identity)
    extra = {"offline_runner": {"command": commands.shell_line(runner_cmd), "engine_start_s": engine_start_s,
                                "engine_reused": not engine_start_s}}
    if "error" in outcome or not raw.exists():
        reason = offline_reason(runner.log, outcome["key"], outcome.get("error") or f"{spec.tool} wrote no result",
                                launch.offline_reasons)
        launch.save_failure((key, knobs, identity), failure.PointFailed(f"{spec.tool} benchmark", reason,
                                                                        runner.log))
        return
    launch.timing["points_s"] += outcome["wall_s"]
    launch.timing["repeats_s"] += outcome["wall_s"] if identity.get("repeat") else 0.0
    if warmed := offline_warmup(spec, knobs):   # inside the benchmark: it ran, or the point failed
        launch.warmup = {"num_prompts": warmed["num_warmups"], "completed": warmed["num_warmups"],
                         "by": "the benchmark's --num-warmups"}
    record = launch.record(key, identity, knobs, "", outcome["wall_s"], {**measured, **extra})
    launch.store.save(key, record, {"bench.json": raw})
    owner = f"{spec.experiment}/" if launch.shared_from else ""
    log(f"{progress} {owner}{name}: measured in {outcome['wall_s']:.1f}s"
        + (f" (engine start {engine_start_s:.1f}s)" if engine_start_s else " (engine reused)"))


def knobs_swept(knobs: dict, spec: SessionSpec) -> dict:
    """The client knobs that differ between this session's points (for names)."""
    varying = {k for p in spec.client_points for k in p if any(p.get(k) != q.get(k) for q in spec.client_points)}
    return {k: v for k, v in knobs.items() if k in varying}


def identified(identity: dict) -> tuple[str, dict]:
    """(store key, identity) of a point."""
    return identity_hash(identity), identity


def session_points(spec: SessionSpec, store: PointStore, engine_version: str | None, hardware: dict,
                   retry_failed: bool) -> tuple[list, list]:
    """(every point, those to measure) of a session without a load search, each as
    (store key, client knobs, identity)."""
    points = []
    # every point once, then every point again: a slow change spreads over all points alike
    for repeat in range(spec.setting("repeats")):
        for knobs in spec.client_points:
            if repeat and EVAL_KNOB in knobs:
                continue   # lm-eval's accuracy (greedy) needs no repeat
            key, identity = identified(point_identity(spec, knobs, engine_version, hardware, repeat))
            points.append((key, knobs, identity))
    missing = [p for p in points if not store.has(p[0]) or (retry_failed and store.load(p[0]).get("failure"))]
    if any(knobs.get(RESTART_KNOB) for _, knobs, _ in missing):
        # a warm point means only after the cold ones in the same session: measure the sequence whole
        missing = points
    return points, missing


def session_timing(spec: SessionSpec, launch: Launch, wall_s: float, shared: dict | None = None) -> dict:
    # the GPUs the job held (servelab.run.gpu_slots, or the scheduler's): a run's GPU-seconds
    gpus = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return {"experiment": spec.experiment, "server_point": spec.server_point, "kind": spec.kind,
            "wall_s": round(wall_s, 2), **{k: round(v, 2) for k, v in launch.timing.items()},
            **({"shared_engine": shared} if shared else {}),
            **({"gpu_wait_s": round(launch.gpu_wait_s, 2)} if launch.gpu_wait_s else {}),
            **({"gpus": gpus, "host": socket.gethostname()} if gpus else {})}


def run(spec: SessionSpec, view_path: str | Path, retry_failed: bool = False,
        guests: list[SessionSpec] = (), gpus: JobGpus | None = None) -> list[dict]:
    """Measure what the store lacks (and, with `retry_failed`, what failed before), and
    what the `guests` (other experiments' sessions of the same engine configuration:
    servelab.config.engine_groups) lack, on the same engine; then write the view of all
    this session's points. `gpus`: the job's, claimed before its engine starts, or once it
    has imported where it can be pre-started (prestarts)."""
    terminate_on_sigterm()
    run_started = time.monotonic()
    store = PointStore(spec.store_dir)
    hardware = provenance.hardware()
    engine_version = environment.installed_version(ENGINES[spec.engine].distributions, spec.env)
    if spec.load_search:
        search = SearchPoints(spec.load_search, spec.client_points[0], store,
                              lambda knobs: identified(point_identity(spec, knobs, engine_version, hardware)))
        points = search.replay()
        missing = search if next(iter(search), None) else []
        log(f"{spec.experiment}/{spec.server_point}: load search on {search.knob} from "
            f"{spec.load_search['low']} to {spec.load_search['high']} ({len(search)} points at most), "
            f"{len(points)} already measured{', more to measure' if missing else ', done'}")
    else:
        points, missing = session_points(spec, store, engine_version, hardware, retry_failed)
        log(f"{spec.experiment}/{spec.server_point}: {len(points)} client point(s), "
            f"{len(points) - len(missing)} already measured, {len(missing)} to measure")
    hosted = []
    for guest in guests:
        guest_store = PointStore(guest.store_dir)
        guest_missing = session_points(guest, guest_store, engine_version, hardware, False)[1]
        if guest_missing:
            hosted.append(Guest(guest, guest_store, guest_missing))
    if hosted:
        log("on the same engine: " + ", ".join(f"{g.spec.experiment}/{g.spec.server_point} "
                                               f"({len(g.missing)} point(s))" for g in hosted))
    if missing or hosted:
        short = gpus.shortfall() if gpus is not None else None
        prestart = not short and prestarts(spec, gpus)
        if gpus is not None and not prestart and not short:
            gpus.take()
        session_name, session_dir = new_session_dir(spec)
        with tempfile.TemporaryDirectory(prefix="servelab-") as tmpdir:
            # `{session_dir}` in an env value: a per-session path (e.g. LMCache's disk tier)
            env = {k: v.replace("{session_dir}", str(session_dir.resolve()))
                   for k, v in server_env(spec, tmpdir).items()}
            if spec.resets_prefix_cache:
                env.update(ENGINES[spec.engine].reset_cache_env)
            launch = Launch(spec, store, hardware, session_name, session_dir, tmpdir, env,
                            gpus=gpus if prestart else None)
            if short:   # a failed row that says so; the rest of the run goes on
                fail_all(launch, missing, hosted, failure.PointFailed("GPUs", short))
            else:
                (measure_offline if spec.kind == "offline" else measure)(launch, missing, hosted)
            points = search.replay() if spec.load_search else points
            guest_wall = 0.0
            for guest in hosted:
                if guest.launch is not None:   # each guest's part of the time, as its own session's
                    g = guest.launch
                    wall = guest.wall_s or sum(g.timing.values())   # offline: its points' (and any start's) time
                    guest_wall += wall
                    write_text(g.session_dir / "timing.json",
                               json.dumps(session_timing(guest.spec, g, wall, g.shared_from)))
            # waiting for a GPU is not the session's time (nor is it without a pre-start)
            timing = session_timing(spec, launch, time.monotonic() - run_started - guest_wall - launch.gpu_wait_s)
            write_text(session_dir / "timing.json", json.dumps(timing))
            log(f"session wall {timing['wall_s']}s: start-up {timing['startup_s']}s, warm-up "
                f"{timing['warmup_s']}s, client points {timing['points_s']}s"
                + (f" (repeats after the first: {timing['repeats_s']}s)" if timing["repeats_s"] else "")
                + (f"; its guests' points {guest_wall:.1f}s more" if hosted else ""))
    view = [store.load(key) for key, _, _ in points]
    write_text(view_path, json.dumps(view, indent=2, sort_keys=True, default=str))
    if text := failure.summary([r for r in view if r.get("failure")]):
        log(text)
    return view
