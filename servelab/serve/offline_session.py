"""An offline session's points (`vllm bench throughput|latency`, hf static batching), run by
the engine's plan runner (servelab.engines.offline_plan) and stored as it reports each."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from servelab.config.experiments import bench_knobs, point_id
from servelab.engines import commands, offline_plan, server_log
from servelab import machine
from servelab.serve import conditions, failure, monitors, point_record
from servelab.serve.launch import Guest, Launch, guest_launch, hold_gpus, log, start_knobs
from servelab.serve.peak_memory import PeakMemory
from servelab.serve.point_identity import knobs_swept
from servelab.serve.server import Server, log_tail
from servelab.serve.session_spec import SessionSpec
from servelab.serve.store import Point


def offline_batches(spec: SessionSpec, missing: list) -> list[list]:
    """The runner processes of a session's offline points: one for all of them (an engine
    per engine configuration), or one per point under a wrapping profiler (nsys, ncu),
    whose report is then that point's alone."""
    return [[m] for m in missing] if spec.monitors.get("wrap") else [missing]


def measure_offline(launch: Launch, missing: list[Point], guests: list[Guest] = ()) -> None:
    """The offline benchmark of every missing point (`vllm bench throughput|latency`,
    servelab.engines.hf.static_batching), then of its guests' missing points, run by the engine's
    plan runner (servelab.engines.offline_plan): the engine is built once per engine
    configuration, not once per point, and lives in the runner's process, run in its
    own process group and torn down like a server. A point that raises fails alone
    (kept); a runner that exits with an error fails the points it did not report; one
    killed by a signal fails the job."""
    spec, engine, session_dir = launch.spec, launch.engine, launch.session_dir
    engine_knobs = start_knobs(spec, session_dir)
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
            args = dict(tool=spec.tool, model=spec.model_path, engine_knobs=engine_knobs, client_knobs=client_knobs,
                        dataset_name=owner.spec.dataset_name, dataset_path=owner.spec.dataset_path, out_json=str(raw))
            # a plan's keys are unique: two experiments may measure the same point
            plan_key = key if owner is launch else f"{key}-{owner.spec.experiment}-{n}"
            points[plan_key] = (owner, key, knobs, identity, raw, engine.offline_args(**args),
                                engine.offline_command(**args))
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
                    conditions.OutsideLoad([runner.proc.pid], launch.env) as outside, \
                    (offline_recorder(launch, runner) if spec.setting("record_conditions")
                     else contextlib.nullcontext()) as timeline:
                log(f"{len(points)} point(s) in one {spec.engine} {spec.tool} process (log {runner.log})")
                while True:
                    code = runner.proc.poll()   # before reading: all it wrote before exiting is read
                    for outcome in offline_plan.read_status(status):
                        if launch.gate is not None:   # its engine is built: what it compiled is cached
                            launch.gate.warmed()
                        if outcome["key"] not in reported:
                            reported.add(outcome["key"])
                            done += 1
                            record_offline(points[outcome["key"]], outcome, runner, cmd,
                                           measured={**memory.result(), "outside": outside.lap()}, progress=f"[{done}/{total}]",
                                           conditions_record=timeline.lap(outcome.get("span"))
                                           if timeline is not None else None)
                            memory.reset()
                    # all reported: stop it now (a profiler wrapping it must see it exit on its own)
                    if code is not None or (len(reported) == len(points) and not spec.monitors.get("wrap")):
                        break
                    time.sleep(0.5)
            stopping = time.monotonic()
        # the runner and its engine's processes stopped: on a loaded host seconds of the session
        launch.spent("teardown_s", time.monotonic() - stopping)
        unreported = [plan_key for plan_key in points if plan_key not in reported]
        if unreported:
            message = f"{spec.engine} {spec.tool} exited with code {code} before {len(unreported)} point(s); " \
                      f"log: {runner.log}"
            # killed, or exited with no exception of its own (its engine killed under it): transient;
            # the cause is read from where the death happened, not from an earlier point's part
            part = death_part(log_tail(runner.log, lines=100_000), unreported[0])
            if not failure.is_deterministic(code) or failure.own_exception(part) is None:
                raise failure.TransientFault(f"{message}: transient, nothing stored for them; a plain rerun "
                                             f"measures them\n{log_tail(runner.log)}")
            for plan_key in unreported:
                owner, key, knobs, identity = points[plan_key][:4]
                owner.save_failure(Point(key, knobs, identity), failure.PointFailed(
                    f"{spec.tool} benchmark", failure.engine_reason(part) or message, runner.log, code))


def death_part(text: str, first_unreported: str) -> str:
    """The part of a runner's log where it died: from the mark of the first point it did not
    report, else after the last point it began (or all of it, where it began none)."""
    mark = f"{offline_plan.POINT_MARK}{first_unreported}"
    if mark in text:
        return text[text.index(mark):]
    last = text.rfind(offline_plan.POINT_MARK)
    return text if last < 0 else text[text.find("\n", last) + 1:]


def offline_reason(log_path: Path, key: str, error: str, seen: dict[str, str]) -> str:
    """The engine's own reason for a failed point, from the point's part of the runner's log
    (its engine's processes log the root cause there, not in the exception). A point whose
    engine configuration already failed to start gets that first point's reason."""
    if error in seen:
        return seen[error]
    text = log_tail(log_path, lines=100_000)
    part = text[text.find(f"{offline_plan.POINT_MARK}{key}"):] if f"{offline_plan.POINT_MARK}{key}" in text else ""
    if failure.own_exception(part) is None and failure.own_exception(error) is None:
        # only a wrapper (EngineDeadError after its engine core was killed): not the point's fault
        raise failure.TransientFault(f"{key}: {error}: no exception of its own (its engine killed?): transient, "
                                     f"a plain rerun measures it; log: {log_path}")
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


def offline_recorder(launch: Launch, runner: Server) -> point_record.PointRecord:
    """The record of conditions of the runner's points, lap by lap (a point: from the last
    report to its own; the first holds the engine's start): the CPU of its processes by role
    (the runner itself, and the engine's own processes where it spawns them), the machine's,
    and on a GPU NVML's figures. No /metrics: no server."""
    return point_record.PointRecord([], [runner.proc.pid], launch.engine.process_roles, {},
                                    machine.visible_indices(launch.env), interval_s=0.5,
                                    default_role=point_record.OFFLINE_RUNNER,
                                    rewalk=1)   # no client in this process to hold the GIL from; the
                                                # engine's processes appear with its build


def record_offline(point: tuple, outcome: dict, runner: Server, runner_cmd: list[str], *, measured: dict,
                   progress: str, conditions_record: dict | None = None) -> None:
    """Store one point the runner reported, in the store of the session it belongs to: its
    engine start (when it paid one) is that session's start-up time, its benchmark the
    point's time; `measured`: its peak memory and the load from outside over it;
    `conditions_record`: its record of conditions (point_record)."""
    launch, key, knobs, identity, raw, _, standalone = point
    spec = launch.spec
    engine_start_s = outcome.get("engine_start_s", 0.0)
    launch.ran_offline(engine_start_s, server_log.read_facts(runner.log, launch.engine), commands.shell_line(standalone))
    name = launch.point_name(knobs, identity)
    extra = {"offline_runner": {"command": commands.shell_line(runner_cmd), "engine_start_s": engine_start_s,
                                "engine_reused": not engine_start_s}}
    if "error" in outcome or not raw.exists():
        reason = offline_reason(runner.log, outcome["key"], outcome.get("error") or f"{spec.tool} wrote no result",
                                launch.offline_reasons)
        launch.save_failure(Point(key, knobs, identity), failure.PointFailed(f"{spec.tool} benchmark", reason,
                                                                        runner.log))
        return
    launch.count_point(outcome["wall_s"], identity)
    if warmed := offline_warmup(spec, knobs):   # inside the benchmark: it ran, or the point failed
        launch.warmed({"num_prompts": warmed["num_warmups"], "completed": warmed["num_warmups"],
                       "by": "the benchmark's --num-warmups"})
    record = launch.record(key, identity, knobs, "", wall_s=outcome["wall_s"], extra={**measured, **extra})
    files = {"bench.json": raw}
    if conditions_record is not None:
        files[point_record.FILE] = raw.with_suffix(".conditions.json.gz")
        point_record.save(conditions_record, files[point_record.FILE])
    launch.store.save(key, record, files)
    owner = f"{spec.experiment}/" if launch.shared_from else ""
    log(f"{progress} {owner}{name}: measured in {outcome['wall_s']:.1f}s"
        + (f" (engine start {engine_start_s:.1f}s)" if engine_start_s else " (engine reused)"))
