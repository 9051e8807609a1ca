"""The load points of a search session, chosen one at a time by a bisection
(servelab.search.load_bisection) from what the store holds.

Iterating replays the bisection against the store: a point already stored is judged
from it; a missing one is yielded to be measured, then judged from what the store holds
after. So a rerun measures only what the last one did not, and an interrupted session
resumes where it stopped. A point whose server died or refused its configuration ends
the bisection (nothing else can be measured on it).
"""

from __future__ import annotations

from typing import Callable, Iterator

from servelab.search import slo as slo_check
from servelab.search.load_bisection import LoadBisection
from servelab.serve.store import Point, PointStore

# failure stages that mean the server itself is gone (servelab.serve.session.measure)
SERVER_STAGES = ("server start-up", "server exited under load")


class SearchPoints:
    def __init__(self, search: dict, base_point: dict, store: PointStore,
                 identify: Callable[[dict], tuple[str, dict]], *, retry_failed: bool = False):
        """`search`: {knob, low, high, steps, slo}; `base_point`: the client knobs every
        step shares; `identify(knobs)` -> (store key, identity); `retry_failed`: a stored
        failure is measured again (once), not replayed."""
        self.search, self.base, self.store, self.identify = search, base_point, store, identify
        self.visited: list[Point] = []
        self.retry_failed = retry_failed
        self.retried: set[str] = set()   # failures measured again in this session

    @property
    def knob(self) -> str:
        return self.search["knob"]

    def knobs_at(self, load) -> dict:
        return {**self.base, self.knob: load}

    @property
    def first_knobs(self) -> dict:
        """The first point's client knobs (what a warm-up imitates)."""
        return self.knobs_at(self.search["low"])

    def __len__(self) -> int:
        """The most points a bisection measures (progress: "[3/6]" means at most six)."""
        return 2 + self.search["steps"]

    def __iter__(self) -> Iterator[Point]:
        integer = self.knob == "max_concurrency"
        low, high = self.search["low"], self.search["high"]
        bisection = LoadBisection(int(low) if integer else low, int(high) if integer else high,
                                  self.search["steps"], integer)
        self.visited = []
        while (load := bisection.next_load()) is not None:
            knobs = self.knobs_at(load)
            key, identity = self.identify(knobs)
            self.visited.append(Point(key, knobs, identity))
            if not self.store.has(key) or self.to_retry(key):
                yield Point(key, knobs, identity)
                self.retried.add(key)   # (only once its measurement has returned)
                if not self.store.has(key):
                    return   # the session could not store it: nothing to judge the next step by
            record = self.store.load(key)
            failure = record.get("failure")
            bench = None if failure else self.store.raw(key)
            met, _, _ = slo_check.judge(self.search["slo"], bench, failure)
            bisection.observe(load, met, fatal=bool(failure) and failure["stage"] in SERVER_STAGES)

    def to_retry(self, key: str) -> bool:
        return self.retry_failed and key not in self.retried and bool(self.store.load(key).get("failure"))

    def replay(self) -> list[Point]:
        """The points visited, against the store as it is (what the view shows); a point
        still missing ends the list."""
        for _ in self:
            self.visited.pop()
            break
        return list(self.visited)
