"""The highest load a server configuration sustains under an SLO, in few measurements.

Load is a request rate (req/s) or a concurrency (integer). The lowest load is measured
first: if it misses the SLO, the configuration has no goodput and nothing more is
measured. Then the highest: if it meets the SLO, that is the answer (at least `high`).
Otherwise the bracket [highest load met, lowest load missed] is halved on a log scale
(loads span orders of magnitude), `steps` times at most, or until an integer bracket
is adjacent. A fatal outcome (the server died or refused its configuration) ends it.
Given the same outcomes it asks for the same loads, so a rerun replays what is stored.
"""

from __future__ import annotations

import math


class LoadBisection:
    def __init__(self, low: float, high: float, steps: int, integer: bool):
        if not 0 < low < high:
            raise ValueError(f"load bisection needs 0 < low < high, got low={low}, high={high}")
        self.low, self.high, self.steps, self.integer = low, high, steps, integer
        self.outcomes: dict[float, bool] = {}   # load -> met the SLO
        self.fatal = False

    @property
    def met(self) -> float | None:
        """The highest load measured that met the SLO."""
        return max((load for load, ok in self.outcomes.items() if ok), default=None)

    @property
    def missed(self) -> float | None:
        """The lowest load measured above every met load that missed it."""
        floor = self.met or 0
        return min((load for load, ok in self.outcomes.items() if not ok and load > floor), default=None)

    def observe(self, load: float, met: bool, fatal: bool = False) -> None:
        self.outcomes[load] = met
        self.fatal = self.fatal or fatal

    def next_load(self) -> float | None:
        """The next load to measure, or None when the search is over."""
        if self.fatal:
            return None
        for end in (self.low, self.high):
            if end not in self.outcomes:
                return end
            if not self.outcomes[end]:
                return None if end == self.low else self.halve()
        return None   # the highest load met the SLO

    def halve(self) -> float | None:
        lo, hi = self.met, self.missed
        if len(self.outcomes) - 2 >= self.steps:
            return None
        if self.integer:
            if hi - lo <= 1:
                return None
            return min(max(round(math.sqrt(lo * hi)), lo + 1), hi - 1)
        return round(math.sqrt(lo * hi), 4)
