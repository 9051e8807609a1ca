"""One server point: launch its server once, measure the client points it lacks.

    identities -> store lookup -> (nothing missing: no launch)
    -> free port -> launch (own process group) -> import the bench client while
    the server starts -> /health with a deadline -> warm-up at the shapes it will
    measure -> each missing client point (prefix cache reset before it, the engine's
    counters and outside load around it), every repeat -> the first point again
    (drift) -> teardown of the whole process tree in every exit path -> view of all points

Its parts: session_spec (the spec), point_identity (keys, records), launch (the fleet,
the Launch, the GPUs), measurement (warm-up, points, drift), offline_session (the runner).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
import json
import tempfile
import time
from pathlib import Path
from typing import Callable

from servelab.engines import environment, server_log
from servelab.fetch import capacity
from servelab.serve import failure, monitors
from servelab.serve.load_search import SearchPoints
from servelab.run import provenance
from servelab.run.compile_gate import CompileGate, compile_key as compile_gate_key
from servelab.run.gpu_claims import JobGpus
from servelab.engines.registry import ENGINES
from servelab.atomic import write_text
from servelab.config.experiments import EVAL_KNOB, RESTART_KNOB
from servelab.serve.launch import (Fleet, Guest, Launch, guest_launch, hold_gpus, launch_plan, log,
                                   new_session_dir, prestarts, server_env)
from servelab.serve.measurement import check_drift, measure_points, warm_up
from servelab.serve.offline_session import measure_offline
from servelab.serve.point_identity import identified, point_identity
from servelab.serve.session_points import listed_points, points_to_measure, still_missing
from servelab.serve.server import ServerError, terminate_on_sigterm
from servelab.serve.session_spec import SessionSpec
from servelab.serve.session_timing import write_timings
from servelab.serve.store import Point, PointStore


def measure_guest(host: Launch, guest: Guest) -> None:
    """A guest's missing points on the host's running server, measured as its own session
    would: its warm-up at its shapes, its client, the prefix cache reset, its drift check."""
    launch = guest_launch(host, guest)
    started = time.monotonic()
    log(f"{guest.spec.experiment}/{guest.spec.server_point} on this engine: {len(guest.missing)} point(s)")
    try:
        launch.warmed(warm_up(launch, first_load(guest.missing), launch.session_dir))
        measure_points(launch, guest.missing, guest.done)
        measure_further(launch, guest.further, guest.done)
        if guest.spec.setting("drift_check"):
            check_drift(launch, guest.missing, guest.done)
    finally:
        guest.took(time.monotonic() - started)


def measure(launch: Launch, missing: list[Point], guests: list[Guest] = ()) -> None:
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
        fleet, serve_cmd = launch_plan(spec, launch_dir, launch.env, gated=launch.gpus is not None)
        write_text(launch_dir / "command.txt", serve_cmd + "\n")
        launch.starting(fleet, serve_cmd)
        done: list[str] = []
        try:
            with fleet:
                log(f"{spec.experiment}/{spec.server_point}: {len(fleet.servers)} process(es) starting"
                    f"{f' (restart {restart})' if restart else ''}, client port {fleet.front.port} "
                    f"(logs in {launch_dir})")
                hold_gpus(launch, fleet.servers)
                # imported while the server loads, or forked from the zygote that forked the
                # server; a client of its own runs in the engine's env
                launch.use_client(lambda: launch.engine.client(*fleet.client_origin()))
                launch.healthy(fleet.wait_healthy(spec.startup_timeout_s, progress=log))
                if launch.gate is not None:   # what it compiled is cached: the next of its key start warm
                    launch.gate.warmed()
                log(f"server healthy after {launch.startup_s:.1f}s; measuring {len(group)} point(s)")
                origin = fleet.facts_from
                facts = server_log.read_facts(origin.log, launch.engine, server_log.scrape_metrics(origin.base_url),
                                              server_log.scrape_info(origin.base_url, launch.engine.info_path))
                launch.learned(facts, server_log.jit_spans_s(facts))
                with sidecars(spec, fleet, launch_dir):
                    launch.warmed(warm_up(launch, first_load(group), launch_dir))
                    measure_points(launch, group, done)
                    if restart == 0:
                        measure_further(launch, launch.further, done)
                    if restart == 0 and spec.setting("drift_check"):
                        check_drift(launch, group.visited if isinstance(group, SearchPoints) else group, done)
                if restart == 0:
                    for guest in guests:
                        measure_guest(launch, guest)
                stopping = time.monotonic()
            launch.spent("teardown_s", time.monotonic() - stopping)
        except ServerError as exc:
            # an engine that raised or refused is data, its own exception the reason; a process
            # killed (front or engine) or a death with no cause of its own is transient
            stage = "server start-up" if launch.startup_s is None else "server exited under load"
            reason = failure.server_reason(exc.log_text(), exc.exit_code, exc.engine_died)
            lost = [p for p in group if p[0] not in done] + \
                [p for guest in (guests if restart == 0 else ()) for p in guest.missing if p[0] not in guest.done]
            if reason is None:
                words = failure.transient_words(exc.gone, failure.exit_words(exc.exit_code) if exc.exit_code is not None
                                                else "stopped", exc.during)
                note_transient(launch, words, len(lost))
                raise failure.TransientFault(
                    f"{spec.experiment}/{spec.server_point}: {words}: transient, {len(lost)} point(s) not "
                    f"measured and nothing stored for them; a plain rerun measures them. Log: {exc.log}") from exc
            died = failure.PointFailed(stage, reason, exc.log, exc.exit_code)
            for point in group:
                if point[0] not in done:
                    launch.save_failure(point, died)
            for guest in guests if restart == 0 else ():   # the same engine: the same fate
                for point in guest.missing:
                    if point[0] not in guest.done:
                        guest_launch(launch, guest).save_failure(point, died)


def measure_further(launch: Launch, further, done: list[str]) -> None:
    """The repeats a target interval asks once the first stage is measured (repeat_rule),
    on the same engine; `further()`: the session's points still missing."""
    more = [p for p in further()] if further is not None else []
    if more:
        log(f"{len(more)} more repeat(s) for the target interval ({launch.spec.setting('repeat_until')['metric']})")
        measure_points(launch, more, done)
        further()   # the records of the repeats just measured say why they stopped


def note_transient(launch: Launch, words: str, lost: int) -> None:
    """Say it in the session's log and leave a note for the run's closing lines
    (failure.transient_summary): the job fails, its session directory stays."""
    log(f"{words}: transient; {lost} point(s) left to a rerun")
    write_text(launch.session_dir / failure.TRANSIENT_NOTE, json.dumps(
        {"experiment": launch.spec.experiment, "server_point": launch.spec.server_point, "what": words,
         "lost_points": lost}))


def fail_all(launch: Launch, missing, guests: list[Guest], why: "failure.PointFailed") -> None:
    """Every point the session (and its guests) would measure, failed for one reason."""
    for point in missing:
        launch.save_failure(point, why)
    for guest in guests:
        for point in guest.missing:
            guest_launch(launch, guest).save_failure(point, why)


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


def compile_gate(spec: SessionSpec, cold_at_once: int | None) -> CompileGate | None:
    """The gate a start of an engine with a compile cache passes (servelab.run.compile_gate):
    its compile key's; None for other engines and eager starts."""
    var = ENGINES[spec.engine].compile_cache_var
    cache = spec.env.get(var) if var else None
    if not cache:
        return None
    key = compile_gate_key(spec.engine, spec.model_identity, spec.server_knobs)
    return None if key is None else CompileGate(Path(cache).parent / "gates", key, cold_at_once, progress=log)


def run(spec: SessionSpec, view_path: str | Path, retry_failed: bool = False,
        guests: list[SessionSpec] = (), *, gpus: JobGpus | None = None, cold_at_once: int | None = None,
        before_claim: Callable[[], float] | None = None) -> list[dict]:
    """Measure what the store lacks (and, with `retry_failed`, what failed before), and
    what the `guests` (other experiments' sessions of the same engine configuration:
    servelab.config.engine_groups) lack, on the same engine; then write the view of all
    this session's points. `gpus`: the job's, claimed before its engine starts, or once it
    has imported where it can be pre-started (prestarts). `before_claim`: what the box must
    do first with no GPU held (FlashInfer's JIT builds: servelab.serve.jit_prebuild), its
    seconds returned; a pre-started server imports meanwhile."""
    terminate_on_sigterm()
    run_started = time.monotonic()
    store = PointStore(spec.store_dir)
    hardware = provenance.hardware()
    engine_version = environment.installed_version(ENGINES[spec.engine].distributions, spec.env)
    search, points, missing = planned_points(spec, store, engine_version, hardware, retry_failed)
    hosted = hosted_guests(guests, engine_version, hardware)
    if missing or hosted:
        start = StartConditions.ready(spec, gpus, cold_at_once, before_claim)
        session_name, session_dir = new_session_dir(spec)
        with tempfile.TemporaryDirectory(prefix="servelab-") as tmpdir:
            launch = Launch(spec, store, hardware, session_name, session_dir, tmpdir,
                            session_env(spec, tmpdir, session_dir), gpus=gpus if start.prestart else None,
                            gate=start.gate, before_claim=start.before_claim, gpu_wait_s=start.gpu_wait_s,
                            gate_wait_s=start.gate_wait_s, jit_build_s=start.jit_build_s,
                            plan=start.plan.as_dict() if start.plan else None,
                            further=still_missing(spec, store, engine_version, hardware))
            if start.short:   # a failed row that says so; the rest of the run goes on
                stage = "capacity plan" if start.plan and not start.plan.fits else "GPUs"
                fail_all(launch, missing, hosted, failure.PointFailed(stage, start.short))
            else:
                try:
                    (measure_offline if spec.kind == "offline" else measure)(launch, missing, hosted)
                finally:
                    if start.gate is not None:
                        start.gate.release()
            points = search.replay() if spec.load_search else \
                listed_points(spec, store, engine_version, hardware, retry_failed=False)[0]
            write_timings(spec, launch, hosted, run_started)
    view = [store.load(key) for key, _, _ in points]
    write_text(view_path, json.dumps(view, indent=2, sort_keys=True, default=str))
    if text := failure.summary([r for r in view if r.get("failure")]):
        log(text)
    return view


def planned_points(spec: SessionSpec, store: PointStore, engine_version: str | None, hardware: dict,
                   retry_failed: bool) -> tuple:
    """(the load search or None, the session's points, those to measure): a search's points
    replayed from the store and bisected further, else the listed points."""
    if not spec.load_search:
        points, missing = listed_points(spec, store, engine_version, hardware, retry_failed=retry_failed)
        log(f"{spec.experiment}/{spec.server_point}: {len(points)} client point(s), "
            f"{len(points) - len(missing)} already measured, {len(missing)} to measure")
        return None, points, missing
    search = SearchPoints(spec.load_search, spec.client_points[0], store,
                          lambda knobs: identified(point_identity(spec, knobs, engine_version, hardware)),
                          retry_failed=retry_failed)
    points = search.replay()
    missing = search if next(iter(search), None) else []
    log(f"{spec.experiment}/{spec.server_point}: load search on {search.knob} from "
        f"{spec.load_search['low']} to {spec.load_search['high']} ({len(search)} points at most), "
        f"{len(points)} already measured{', more to measure' if missing else ', done'}")
    return search, points, missing


def hosted_guests(guests: list[SessionSpec], engine_version: str | None, hardware: dict) -> list[Guest]:
    """The guests with points to measure on this engine."""
    hosted = []
    for guest in guests:
        guest_store = PointStore(guest.store_dir)
        guest_missing = points_to_measure(guest, guest_store, engine_version, hardware, retry_failed=False)[1]
        if guest_missing:
            hosted.append(Guest(guest, guest_store, guest_missing,
                                further=still_missing(guest, guest_store, engine_version, hardware)))
    if hosted:
        log("on the same engine: " + ", ".join(f"{g.spec.experiment}/{g.spec.server_point} "
                                               f"({len(g.missing)} point(s))" for g in hosted))
    return hosted


@dataclass
class StartConditions:
    """What is settled before a session's engine starts: whether it can (`short`: why not),
    its capacity plan, a pre-start, the compile gate, and the seconds waited for each."""
    short: str | None
    plan: object
    prestart: bool
    gate: CompileGate | None
    before_claim: Callable[[], float] | None
    gpu_wait_s: float = 0.0
    gate_wait_s: float = 0.0
    jit_build_s: float = 0.0

    @classmethod
    def ready(cls, spec: SessionSpec, gpus: JobGpus | None, cold_at_once: int | None,
              before_claim: Callable[[], float] | None) -> "StartConditions":
        short = gpus.shortfall() if gpus is not None else None
        # what the engine would refuse for want of memory, said before any start or GPU claim
        plan = None if short else capacity.plan_here(spec.model_path, spec.engine, spec.server_knobs, spec.env)
        if plan and not plan.fits:
            short = f"does not fit ({plan.memory}): {plan.why}"
        elif plan and plan.warning:
            log(f"capacity plan ({plan.memory}): {plan.warning}")
        prestart = not short and prestarts(spec, gpus)
        start = cls(short, plan, prestart, None if short else compile_gate(spec, cold_at_once), before_claim)
        if before_claim is not None and not prestart and not short:
            start.jit_build_s, start.before_claim = before_claim(), None
        if start.gate is not None and not prestart:
            start.gate_wait_s = start.gate.wait()   # a pre-started one passes it while it imports (hold_gpus)
        if gpus is not None and not prestart and not short:
            waited = time.monotonic()
            gpus.take()   # blocks while other jobs hold the GPUs: not this session's time
            start.gpu_wait_s = time.monotonic() - waited
        return start


def session_env(spec: SessionSpec, tmpdir: str, session_dir: Path) -> dict:
    """The servers' environment: `{session_dir}` in a value made a per-session path (e.g.
    LMCache's disk tier); the engine's dev mode where the prefix cache is reset."""
    env = {k: v.replace("{session_dir}", str(session_dir.resolve())) for k, v in server_env(spec, tmpdir).items()}
    # an offline runner gets the servers' dev mode too (it serves no routes): in the
    # servers' environment it forks from their zygote, not one of its own that imports
    # again each time it has idled out (4 times in README command 1)
    if spec.resets_prefix_cache or spec.kind == "offline":
        env.update(ENGINES[spec.engine].reset_cache_env)
    return env
