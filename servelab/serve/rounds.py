"""An experiment measured in interleaved rounds (`rounds:` in the experiment's config).

Measuring every repeat of configuration A, then every repeat of B, reads a drift of the box
over those minutes (a neighbour's load, the hypervisor's steal, a clock) as a difference
between A and B. In rounds, every configuration's server stays up, and each round measures
each configuration's points once, in an order drawn at random from the recorded seed (RMIT:
Abedi and Brecht, ICPE 2017); comparisons pair the configurations round by round
(servelab.analysis.paired). Only the configuration whose turn it is gets load: the others sit
idle, and each point's record says what they took meanwhile (`idle_servers_cpu_cores`: the CPU
of every process of their servers' groups over the point).

The first stage is `least` rounds; from its spread of paired ratios, Stein's two-stage rule
decides how many rounds bring every paired interval of `metric` within +-`within`, at most
`most` (the decision annotated on each first-stage record, so that each configuration's own
job lists the same points). The experiment's first configuration's job measures every
configuration; the others' jobs find their points measured and write their views
(workflow/rules/serve.smk). The drift check is off in rounds: the pairing is what cancels
drift.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
import tempfile
from pathlib import Path

from servelab.stats import log_ratios, stein_rounds
from servelab.atomic import write_text
from servelab.config.experiments import gpus_needed
from servelab.engines import environment
from servelab.engines.registry import ENGINES
from servelab.run import provenance
from servelab.serve import failure
from servelab.serve.launch import Launch, log, new_session_dir
from servelab.serve.measurement import measure_points, warm_up
from servelab.serve.repeat_rule import target_value
from servelab.serve.round_servers import Arm, IdleServers, failed, start, start_together
from servelab.serve.server import ServerError, terminate_on_sigterm
from servelab.serve.session import first_load
from servelab.serve.session_timing import session_timing
from servelab.serve.session_points import listed_points, points_to_measure
from servelab.serve.session_spec import SessionSpec
from servelab.serve.store import PointStore

DEFAULTS = {"seed": 0, "least": 3, "most": 6, "metric": "output_throughput", "within": 0.03, "starts": "auto"}
DESIGN = "interleaved rounds"
MANY = 10 ** 6   # no cap: what Stein's rule asks for, said where `most` cuts it


def design(spec: SessionSpec) -> dict:
    return {**DEFAULTS, **(spec.rounds or {})}


def round_order(seed: int, index: int, names: list[str]) -> list[str]:
    """The order of round `index`: the configurations shuffled by a generator seeded with the
    experiment's seed and the round's number (the same on any box, in any rerun)."""
    order = list(names)
    random.Random(f"servelab-rounds:{seed}:{index}").shuffle(order)
    return order


def with_rounds(spec: SessionSpec, rounds: int) -> SessionSpec:
    """The spec whose repeats are `rounds` (a repeat is a round), no drift check, no
    per-point repeat rule (the rounds have their own)."""
    return dataclasses.replace(spec, measurement={**spec.measurement, "repeats": rounds, "drift_check": False,
                                                  "repeat_until": None})


def planned(spec: SessionSpec, store: PointStore, engine_version: str | None, hardware: dict) -> SessionSpec:
    """A configuration's spec with the rounds its experiment decided (the decision on its
    first stage's records), or the first stage's while undecided."""
    least = design(spec)["least"]
    first = with_rounds(spec, least)
    points = points_to_measure(first, store, engine_version, hardware, retry_failed=False)[0]
    decided = [d["rounds"] for key, _, _ in points if store.has(key)
               if isinstance(d := store.load(key).get("rounds_decision"), dict)]
    return with_rounds(spec, max(decided) if decided else least)


def planned_here(spec: SessionSpec) -> SessionSpec:
    """planned() on this box: its store, engine version and hardware."""
    version = environment.installed_version(ENGINES[spec.engine].distributions, spec.env)
    return planned(spec, PointStore(spec.store_dir), version, provenance.hardware())


def metric_values(spec: SessionSpec, store: PointStore, version, hardware, rounds: int, metric: str) -> list[list]:
    """[client point][round] -> the metric (None: failed or missing)."""
    points = points_to_measure(with_rounds(spec, rounds), store, version, hardware, retry_failed=False)[0]
    out = [[None] * rounds for _ in spec.client_points]
    for key, knobs, identity in points:
        i = next(j for j, p in enumerate(spec.client_points) if p == knobs)
        if store.has(key) and not store.load(key).get("failure"):
            out[i][identity.get("repeat", 0)] = target_value(store.raw(key), metric)
    return out


def decide(arms: list[SessionSpec], store: PointStore, version, hardware) -> dict:
    """From the first stage: the rounds every paired interval of the metric needs (the most
    of them), at most `most`; the first stage where a pair lacks values."""
    d = design(arms[0])
    least = d["least"]
    values = {a.server_point: metric_values(a, store, version, hardware, least, d["metric"]) for a in arms}
    base = values[arms[0].server_point]
    wanted, unpaired = [], []   # Stein's rounds for each pair, before the cap
    for arm in arms[1:]:
        for i, vals in enumerate(values[arm.server_point]):
            logs = log_ratios(base[i], vals)
            if logs is None or len(logs) < least:
                unpaired.append(arm.server_point)
                continue
            wanted.append(stein_rounds(logs, d["within"], MANY))
    rounds = min(d["most"], max(wanted, default=least))
    target = f"paired {d['metric']} within +-{100 * d['within']:g} %"
    why = f"{target}: {rounds} rounds (Stein's rule on the first {least})"
    if max(wanted, default=0) > d["most"]:
        why = (f"{target} needs {max(wanted)} rounds by Stein's rule on the first {least}: capped at the most "
               f"({d['most']}), so the widest paired interval stays wider")
    if unpaired:
        why += f"; not paired at every round of the first stage: {', '.join(sorted(set(unpaired)))}"
    return {"rounds": rounds, "first_stage": least, "wanted": max(wanted, default=least), "why": why}


def starts_together(specs: list[SessionSpec], gpus: list[str] | None) -> bool:
    """Whether the configurations' servers start at once (rounds' `starts`): `auto` starts
    them together on GPUs where each fixes its KV cache (`kv_cache_memory_bytes`: none sizes
    its cache from the memory the others leave while they start), one at its first turn
    otherwise (on a CPU a start is CPU-bound: overlapping them gains nothing)."""
    starts = design(specs[0])["starts"]
    if starts != "auto":
        return starts == "together"
    return bool(gpus) and all(s.server_knobs.get("kv_cache_memory_bytes") for s in specs)


def measure_rounds(arms: list[Arm], store: PointStore, hardware: dict, tmpdir: str,
                   stack: contextlib.ExitStack, seed: int, rounds: int) -> None:
    """Rounds 0..rounds-1, each in its order: load point by load point, each configuration's
    point of that round in turn (a configuration and its baseline at one load are measured
    next to each other)."""
    names = [a.spec.server_point for a in arms]
    by_name = dict(zip(names, arms))
    for index in range(rounds):
        order = round_order(seed, index, names)
        todo = {n: [p for p in by_name[n].missing if p[2].get("repeat", 0) == index and p[0] not in by_name[n].done]
                for n in order}
        if not any(todo.values()):
            continue
        log(f"round {index + 1}/{rounds}: {' > '.join(order)}")
        for step in range(max(len(points) for points in todo.values())):
            for position, name in enumerate(order):
                arm = by_name[name]
                if step >= len(todo[name]) or arm.out:
                    continue
                try:
                    if arm.launch is None:
                        start(arm, store, hardware, tmpdir, stack)
                    if not arm.warm:   # at its own load, just before its first point
                        arm.launch.warmed(warm_up(arm.launch, first_load(arm.missing), arm.launch.session_dir))
                        arm.warm = True
                    before = len(arm.done)
                    idle = IdleServers([a for a in arms if a is not arm and a.launch is not None and not a.out])
                    measure_points(arm.launch, [todo[name][step]], arm.done)
                except ServerError as exc:
                    failed(arm, exc)
                    continue
                for key in arm.done[before:]:
                    store.annotate(key, {"round": {"design": DESIGN, "seed": seed, "index": index,
                                                   "position": position, "order": order,
                                                   "idle_servers_cpu_cores": idle.cores(),
                                                   "settled_s": idle.settled_s}})


def shares_problem(shares: list[float | None]) -> str | None:
    """Why servers of these `gpu_memory_utilization` shares cannot be up at once on one GPU
    (None: they can): each needs its share, summing to at most 0.95."""
    if any(v is None for v in shares) or sum(shares) > 0.95:
        return (f"in rounds every configuration's server is up at once on one GPU: give each "
                f"server.configs.NAME.gpu_memory_utilization, summing to at most 0.95 (now "
                f"{['unset' if v is None else v for v in shares]})")
    return None


def gpu_shares(specs: list[SessionSpec], gpus: list[str] | None) -> str | None:
    """Why the configurations' servers cannot be up at once on the job's GPUs (None: they
    can, or there are none): their shares (shares_problem), and the same GPU count."""
    if not gpus:
        return None
    if why := shares_problem([s.server_knobs.get("gpu_memory_utilization") for s in specs]):
        return f"{why}; the job's GPU(s): {','.join(gpus)}"
    if len({gpus_needed(s.server_knobs) for s in specs}) > 1:
        return "in rounds every configuration's server shares the job's GPUs: they need the same GPU count"
    return None


def run(host: SessionSpec, others: list[SessionSpec], view_path: str | Path, retry_failed: bool = False,
        gpus: list[str] | None = None) -> list:
    """Measure every configuration of the experiment in rounds (the first stage, then the
    rounds it decides), then write the host configuration's view."""
    terminate_on_sigterm()
    store = PointStore(host.store_dir)
    hardware = provenance.hardware()
    version = environment.installed_version(ENGINES[host.engine].distributions, host.env)
    specs = [host, *others]
    d = design(host)
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory(prefix="servelab-rounds-") as tmpdir:
        arms: dict[str, Arm] = {}
        stages = [d["least"]]
        together = starts_together(specs, gpus)
        if why := gpu_shares(specs, gpus):   # said before any server starts; each point a failed row
            stages = []
            for spec in specs:
                name, session_dir = new_session_dir(spec)
                launch = Launch(spec, store, hardware, name, session_dir, tmpdir, {})
                for point in listed_points(with_rounds(spec, d["least"]), store, version, hardware,
                                           retry_failed=retry_failed)[1]:
                    launch.save_failure(point, failure.PointFailed("GPU shares", why))
        while stages:
            rounds = stages.pop()
            for spec in specs:
                points, missing = listed_points(with_rounds(spec, rounds), store, version, hardware,
                                                retry_failed=retry_failed)
                arm = arms.setdefault(spec.server_point, Arm(with_rounds(spec, rounds), [],
                                                             note={"design": DESIGN, **design(spec)}))
                arm.spec = with_rounds(spec, rounds)
                arm.missing = [p for p in missing if p[0] not in arm.done]
                if arm.launch is not None:
                    arm.launch.spec = arm.spec
            todo = sum(len(a.missing) for a in arms.values())
            log(f"{host.experiment}: {len(specs)} configurations in {rounds} interleaved rounds (seed {d['seed']}), "
                f"{todo} point(s) to measure")
            if together:
                start_together(list(arms.values()), store, hardware, tmpdir, stack)
            measure_rounds(list(arms.values()), store, hardware, tmpdir, stack, d["seed"], rounds)
            if rounds == d["least"]:
                decision = decide(specs, store, version, hardware)
                for spec in specs:
                    for key, _, _ in listed_points(with_rounds(spec, d["least"]), store, version, hardware,
                                                   retry_failed=False)[0]:
                        if store.has(key) and store.load(key).get("rounds_decision") != decision:
                            store.annotate(key, {"rounds_decision": decision})
                log(f"rounds: {decision['why']}")
                if decision["rounds"] > rounds:
                    stages.append(decision["rounds"])
        for arm in arms.values():
            if arm.launch is not None:
                timing = session_timing(arm.spec, arm.launch, arm.launch.parts_s())
                write_text(arm.launch.session_dir / "timing.json", json.dumps({**timing, "design": DESIGN}))
    final = planned(host, store, version, hardware)
    view = [store.load(key) for key, _, _ in listed_points(final, store, version, hardware, retry_failed=False)[0]]
    write_text(view_path, json.dumps(view, indent=2, sort_keys=True, default=str))
    if text := failure.summary([r for r in view if r.get("failure")]):
        log(text)
    return view

