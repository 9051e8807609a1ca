"""Which server configurations a search round tries, from the goodput measured so far.

`coordinate`: a compass search over the space's ordered values. Round 0 tries the start
(the given one, else each knob's middle value); each later round tries every untried
neighbour of the best configuration so far (one knob moved one value up or down), all
of them at once, so that a cluster runs a round in parallel. The search ends when the
best has no untried neighbour (a local optimum on the grid) or the budget is spent
(`launches_left`, which the caller computes from its launch and time budgets).
`grid`: every configuration in round 0 (the exhaustive baseline).
"""

from __future__ import annotations

import itertools

STRATEGIES = ("coordinate", "grid")


def start_point(space: dict[str, list], start: dict | None) -> dict:
    """The configuration a coordinate search starts from: each knob's given start value,
    else its middle value (the lower of two)."""
    return {k: (start or {}).get(k, values[(len(values) - 1) // 2]) for k, values in space.items()}


def neighbours(space: dict[str, list], point: dict) -> list[dict]:
    """Configurations one knob-step away, in the space's knob order, down before up."""
    out = []
    for knob, values in space.items():
        i = values.index(point[knob])
        out += [{**point, knob: values[j]} for j in (i - 1, i + 1) if 0 <= j < len(values)]
    return out


def best(tried: list[tuple[dict, float]]) -> dict | None:
    """The configuration with the highest goodput (the first tried, on a tie)."""
    return max(tried, key=lambda t: t[1])[0] if tried else None


def next_round(strategy: str, space: dict[str, list], tried: list[tuple[dict, float]], launches_left: int,
               *, start: dict | None = None, exhausted: str = "the launch budget is spent") -> tuple[list[dict], str]:
    """(configurations of the next round, why it is the last when it is empty).
    `tried`: [(configuration, goodput)] in the order tried (0 for one with none);
    `exhausted`: the reason given when `launches_left` ends the search."""
    if strategy == "grid":
        if tried:
            return [], "the grid is complete"
        candidates = [dict(zip(space, combo)) for combo in itertools.product(*space.values())]
    elif not tried:
        candidates = [start_point(space, start)]
    else:
        seen = [config for config, _ in tried]
        candidates = [n for n in neighbours(space, best(tried)) if n not in seen]
        if not candidates:
            return [], "converged: every neighbour of the best configuration was tried"
    if launches_left <= 0:
        return [], exhausted
    return candidates[:launches_left], ""
