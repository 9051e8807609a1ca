"""Which points a session measures: each client point `repeats` times (every point once,
then every point again), or, under `repeat_until`, its first stage and then the repeats
its target interval asks (servelab.serve.repeat_rule); which of them the store lacks."""

from __future__ import annotations

from typing import Callable

from servelab.config.experiments import EVAL_KNOB, RESTART_KNOB
from servelab.serve import repeat_rule
from servelab.serve.point_identity import identified, point_identity
from servelab.serve.session_spec import SessionSpec
from servelab.serve.store import Point, PointStore


def points_to_measure(spec: SessionSpec, store: PointStore, engine_version: str | None, hardware: dict,
                      *, retry_failed: bool) -> tuple[list, list, dict]:
    """(every point, those to measure, the repeat rule's decision per client point index) of
    a session without a load search, each point as (store key, client knobs, identity).
    Reads the store, writes nothing (note_repeat_rule writes the decisions)."""
    rule = spec.setting("repeat_until") if not spec.load_search else None
    first = repeat_rule.first_stage(rule, spec.setting("repeats"))
    decisions = {}
    wanted = [1 if EVAL_KNOB in knobs else first for knobs in spec.client_points]   # lm-eval (greedy): once
    if rule:   # each point's first stage measured: the repeats its target interval asks
        for i, knobs in enumerate(spec.client_points):
            keys = [identified(point_identity(spec, knobs, engine_version, hardware, repeat=r))[0]
                    for r in range(wanted[i])]
            if wanted[i] > 1 and all(store.has(k) for k in keys):
                decision = repeat_rule.decide(rule, [None if store.load(k).get("failure") else store.raw(k)
                                                     for k in keys])
                wanted[i] = decision["repeats"]
                decisions[i] = decision
    points = []
    # every point once, then every point again: a slow change spreads over all points alike
    for repeat in range(max(wanted, default=0)):
        for knobs, n in zip(spec.client_points, wanted):
            if repeat < n:
                key, identity = identified(point_identity(spec, knobs, engine_version, hardware, repeat=repeat))
                points.append(Point(key, knobs, identity))
    missing = [p for p in points if not store.has(p[0]) or (retry_failed and store.load(p[0]).get("failure"))]
    if any(knobs.get(RESTART_KNOB) for _, knobs, _ in missing):
        # a warm point means only after the cold ones in the same session: measure the sequence whole
        missing = points
    return points, missing, decisions


def note_repeat_rule(spec: SessionSpec, store: PointStore, points: list, decisions: dict) -> None:
    """Each measured repeat's record says how many repeats its point gets and why they stopped."""
    for i, decision in decisions.items():
        for key, knobs, _ in points:
            if knobs is spec.client_points[i] and store.has(key) and store.load(key).get("repeat_rule") != decision:
                store.annotate(key, {"repeat_rule": decision})


def listed_points(spec: SessionSpec, store: PointStore, engine_version: str | None, hardware: dict,
                  *, retry_failed: bool) -> tuple[list, list]:
    """(every point, those to measure), the repeat rule's decisions noted in the store: what
    a session lists at its start and once it has measured."""
    points, missing, decisions = points_to_measure(spec, store, engine_version, hardware, retry_failed=retry_failed)
    note_repeat_rule(spec, store, points, decisions)
    return points, missing


def still_missing(spec: SessionSpec, store: PointStore, engine_version, hardware) -> Callable[[], list] | None:
    """Under repeat_until: what the session still lacks, asked again once its first stage
    is measured (its further repeats); None otherwise."""
    if not spec.setting("repeat_until") or spec.load_search:
        return None
    return lambda: points_to_measure(spec, store, engine_version, hardware, retry_failed=False)[1]
