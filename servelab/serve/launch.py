"""What a session starts and its points share: the server's environment, the fleet of
processes of the server point (launch_plan), the Launch (and its guests') state, and the
job's GPUs (granted to a pre-started engine)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from servelab.atomic import write_text
from servelab.config.experiments import EVAL_KNOB, gpus_needed, point_id
from servelab.config import engine_facts as facts
from servelab.engines import commands, prestart, zygote
from servelab.engines.environment import engine_cache_env  # noqa: F401 (the session rule's)
from servelab.engines.vllm import fusion_size
from servelab.engines.registry import ENGINES
from servelab.run import provenance
from servelab.run.compile_gate import CompileGate
from servelab.run.gpu_claims import JobGpus
from servelab.serve import failure, monitors, topology
from servelab.serve.point_identity import knobs_swept, point_record
from servelab.serve.server import Server, free_port
from servelab.serve.session_spec import SessionSpec
from servelab.serve.store import Point, PointStore


def log(msg: str) -> None:
    print(f"[servelab {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# Snakemake sets these to the job's thread count; vLLM's CPU backend binds its own
# OpenMP threads per core, and an inherited OMP_NUM_THREADS oversubscribes that
# core (measured: ITL p50 2.6 ms without, 134 ms with OMP_NUM_THREADS=2 on 2 cores).
THREAD_COUNT_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                     "GOTO_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def server_env(spec: SessionSpec, tmpdir: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in THREAD_COUNT_VARS}
    env.update({k: str(v) for k, v in spec.env.items()})
    env["TMPDIR"] = tmpdir
    # the server runs `python -m servelab.engines.vllm.cli`: make the package importable
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def new_session_dir(spec: SessionSpec) -> tuple[str, Path]:
    """Where a session keeps its logs and commands, beside the points it measures."""
    name = f"{spec.server_point}-{time.strftime('%Y%m%dT%H%M%S')}"
    path = Path(spec.store_dir) / "sessions" / name
    path.mkdir(parents=True, exist_ok=True)
    return name, path


class Fleet:
    """The processes of one server point, front (what the client talks to) last:
    started in order, healthy in order, all torn down on exit."""

    def __init__(self, servers: list[Server], facts_from: Server, counted: list[Server] | None = None):
        self.servers = servers
        self.front = servers[-1]
        self.facts_from = facts_from
        self.counted = counted or [facts_from]   # whose /metrics counters a point sums
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

    def client_origin(self) -> tuple[dict | None, zygote.Forked | None]:
        """The environment a client of this fleet runs in (its front's), and the zygote's
        child that its front is (None where the front is a process of its own)."""
        return self.front.env, self.front.proc if isinstance(self.front.proc, zygote.Forked) else None

    def dead(self) -> bool:
        """Any of its processes exited, or any engine shows its death."""
        return any(s.proc is not None and (s.proc.poll() is not None or s.engine_death()) for s in self.servers)

    def check_alive(self, during: str) -> None:
        for server in self.servers:
            server.check_alive(during if len(self.servers) == 1 else f"({server.log.stem}) {during}")


def engine_signs(engine) -> dict:
    """What tells a server that its engine died (servelab.serve.server.Server.engine_death)."""
    return {"fatal_lines": engine.fatal_lines, "engine_processes": engine.engine_processes}


def start_knobs(spec: SessionSpec, session_dir: Path) -> dict:
    """The engine knobs a start of the session gets: its point's, a profiler's, and at TP > 1
    on a CUDA GPU vLLM's own all-reduce fusion size (servelab.engines.vllm.fusion_size)."""
    knobs = {**spec.server_knobs, **monitors.profiler_knobs(spec.monitors, session_dir)}
    return fusion_size.start_knobs(spec.engine, knobs, provenance.gpu_compute_capabilities)


def launch_plan(spec: SessionSpec, session_dir: Path, env: dict, gated: bool = False) -> tuple[Fleet, str]:
    """The processes of the server point and the command lines to record; `gated`: its one
    server is pre-started (servelab.engines.prestart), to be granted its GPUs (hold_gpus)."""
    engine = ENGINES[spec.engine]
    knobs = start_knobs(spec, session_dir)
    wrap = spec.monitors.get("wrap")
    plan = topology.fleet_roles(spec.engine, knobs, spec.topology, free_port)
    if plan is None:
        port = free_port()
        cmd = monitors.wrap_command(engine.serve_command(spec.model_path, port, knobs, spec.served_name),
                                    wrap, session_dir)
        server = Server(cmd, port, session_dir / "server.log", env=env, gated=gated, **engine_signs(engine))
        return Fleet([server], server), commands.shell_line(cmd)
    rs, front_port, router = plan
    devices = topology.split_devices(env.get("CUDA_VISIBLE_DEVICES"), [gpus_needed(r.knobs) for r in rs])
    servers, lines = [], []
    for role, visible in zip(rs, devices):
        cmd = monitors.wrap_command(engine.serve_command(spec.model_path, role.port, role.knobs, spec.served_name),
                                    wrap, session_dir)
        role_env = {**env, **role.env, **({"CUDA_VISIBLE_DEVICES": visible} if visible else {})}
        # each role's environment is its own (ports, cores): a zygote would serve one start
        role_env.pop(zygote.ENV, None)
        servers.append(Server(cmd, role.port, session_dir / f"{role.name}.log", env=role_env,
                              **engine_signs(engine)))
        lines.append(f"# {role.name}\n{commands.shell_line(cmd)}")
    servers.append(Server(router, front_port, session_dir / "router.log", env=env))
    lines.append(f"# router\n{commands.shell_line(router)}")
    # facts (KV capacity, weights) and counters from the decode server of a P/D pair;
    # facts from the first replica, counters summed over the replicas
    if spec.topology:
        return Fleet(servers, facts_from=servers[1]), "\n".join(lines)
    return Fleet(servers, facts_from=servers[0], counted=servers[:-1]), "\n".join(lines)


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
    gate: CompileGate | None = None   # passed before its GPUs are claimed, warm once healthy (compile_gate)
    gpu_wait_s: float = 0.0
    gate_wait_s: float = 0.0   # waiting for a start of its compile key to fill the cache
    before_claim: Callable[[], float] | None = None   # the box's builds before any GPU claim (session.run)
    jit_build_s: float = 0.0   # FlashInfer's JIT builds before the claim, no GPU held (not its wall)
    jit_s: float = 0.0   # of its start-ups, the spans of FlashInfer's JIT builds (server_log.JIT_SPANS)
    plan: dict | None = None   # the capacity plan it started under (servelab.fetch.capacity)
    shared_from: dict | None = None   # on another experiment's engine: its experiment, point, session
    offline_reasons: dict = field(default_factory=dict)   # runner error -> the engine's own reason
    further: Callable[[], list] | None = None   # under repeat_until: the points still missing (session.py)
    sent_per_s: dict = field(default_factory=dict)   # point name -> requests sent a second at its warm-up at load
    # where the session's time went: server start-ups, warm-ups, client points, stopping its
    # processes (seconds), and of the points' seconds, those of repeats after the first (what
    # `repeats` costs)
    timing: dict = field(default_factory=lambda: {"startup_s": 0.0, "warmup_s": 0.0, "points_s": 0.0,
                                                  "drift_s": 0.0, "teardown_s": 0.0, "repeats_s": 0.0})

    # what is learned while it runs, set here only (fixed at launch: the fields above)
    def starting(self, fleet: Fleet, serve_cmd: str) -> None:
        """A fleet launched (the session's first, or after a restart): nothing known of it yet."""
        self.fleet, self.serve_cmd, self.startup_s, self.facts = fleet, serve_cmd, None, {}

    def use_client(self, make: Callable[[], object]) -> None:
        """The session's benchmark client, made once (`make`) and kept across restarts."""
        self.client = self.client or make()

    def healthy(self, startup_s: float) -> None:
        self.startup_s = startup_s
        self.timing["startup_s"] += startup_s

    def learned(self, server_facts: dict, jit_s: float = 0.0) -> None:
        """What the server's log and endpoints said; of its start-up, FlashInfer's JIT builds."""
        self.facts = server_facts
        self.jit_s += jit_s

    def warmed(self, warmup: dict | None) -> None:
        self.warmup = warmup

    def ran_offline(self, engine_start_s: float, server_facts: dict, serve_cmd: str) -> None:
        """An offline point: its engine start where it paid one, the facts of the runner's log,
        the command that reproduces it on its own."""
        if engine_start_s:
            self.healthy(engine_start_s)
        self.facts, self.serve_cmd = server_facts, serve_cmd

    def spent(self, part: str, seconds: float) -> None:
        """Seconds of the session's time spent on `part` (warmup_s, drift_s...)."""
        self.timing[part] += seconds

    def parts_s(self) -> float:
        """The seconds of its parts (repeats_s is a part of points_s, not one more)."""
        return sum(v for k, v in self.timing.items() if k != "repeats_s")

    def sent_at_warmup(self, point: str, per_s: float) -> None:
        """Requests a second a point's warm-up at load sent (its repeats compare with it)."""
        self.sent_per_s[point] = per_s

    def count_point(self, wall_s: float, identity: dict) -> None:
        """A measured point's seconds, and among them a repeat's after the first."""
        self.timing["points_s"] += wall_s
        self.timing["repeats_s"] += wall_s if identity.get("repeat") else 0.0

    def point_name(self, knobs: dict, identity: dict | None = None) -> str:
        name = "lm_eval" if EVAL_KNOB in knobs else point_id(knobs_swept(knobs, self.spec))
        repeats = self.spec.setting("repeats")
        repeat = (identity or {}).get("repeat", 0)
        return f"{name} (repeat {repeat + 1}/{repeats})" if repeats > 1 and EVAL_KNOB not in knobs else name

    def record(self, key: str, identity: dict, knobs: dict, client_command: str, *, wall_s: float | None,
               extra: dict | None = None) -> dict:
        return {**point_record(self.spec, key, identity, knobs, session_name=self.session_name,
                               hardware=self.hardware, distributions=self.engine.distributions,
                               command=self.serve_cmd, client_command=client_command, startup_s=self.startup_s,
                               wall_s=wall_s, facts=self.facts),
                "repeat": identity.get("repeat", 0), "warmup": self.warmup,
                **({"shared_engine": self.shared_from} if self.shared_from else {}),
                **({"capacity_plan": self.plan} if self.plan else {}), **(extra or {})}

    def save_failure(self, point: Point, failure: "failure.PointFailed") -> None:
        key, knobs, identity = point
        self.store.save(key, self.record(key, identity, knobs, "", wall_s=None, extra={"failure": failure.as_record()}), {})
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
    further: Callable[[], list] | None = None   # under repeat_until: its points still missing

    def took(self, seconds: float) -> None:
        """Its points' wall on the host's engine: its session's time."""
        self.wall_s = seconds


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


def prestarts(spec: SessionSpec, gpus: JobGpus | None) -> bool:
    """Whether the session's engine starts before the job holds its GPUs
    (servelab.engines.prestart): one vLLM process, no profiler wrapping it, on a machine
    where the job claims its GPUs itself and has not yet."""
    return bool(gpus is not None and gpus.deferrable and facts.of(spec.engine).defers_start and not spec.topology
                and not spec.monitors.get("wrap"))


def hold_gpus(launch: Launch, processes: list[Server]) -> None:
    """A pre-started session's turn on its GPUs: at once where they are free (its start-up
    then counts from its launch, imports included); else once its processes have imported,
    waiting for the GPUs (its start-up then counts from the grant: the imports ran while
    another job used them). Then its processes go on, on them."""
    if launch.gpus is None:
        return
    if launch.before_claim is not None:   # while its processes import, no GPU held
        launch.jit_build_s += launch.before_claim()
        launch.before_claim = None
    if launch.gate is not None:   # while its processes import
        launch.gate_wait_s += launch.gate.wait()
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
