"""The load bisection: the highest load meeting an SLO, in a bounded number of steps."""
import math

import pytest

from servelab.search.load_bisection import LoadBisection


def run(bisection: LoadBisection, capacity: float) -> list:
    """Drive a bisection against a server that meets the SLO up to `capacity`."""
    asked = []
    while (load := bisection.next_load()) is not None:
        asked.append(load)
        bisection.observe(load, load <= capacity)
    return asked


def test_integer_load_finds_the_exact_capacity_and_stops_at_an_adjacent_bracket():
    b = LoadBisection(1, 64, steps=10, integer=True)
    asked = run(b, capacity=11)
    assert asked[:2] == [1, 64]
    assert b.met == 11 and b.missed == 12
    assert len(asked) <= 2 + math.ceil(math.log2(64))   # a bisection, not a scan
    assert len(set(asked)) == len(asked)                # never the same load twice


def test_rate_load_halves_on_a_log_scale_within_its_steps():
    b = LoadBisection(0.5, 32.0, steps=3, integer=False)
    asked = run(b, capacity=5.0)
    assert asked[:3] == [0.5, 32.0, 4.0]                # sqrt(0.5 * 32)
    assert len(asked) == 5                              # low, high and 3 steps
    assert b.met <= 5.0 < b.missed
    assert b.missed / b.met < 32 / 0.5 / 8              # the bracket shrank geometrically


def test_a_low_load_that_misses_ends_at_once_and_a_high_one_that_meets_too():
    assert run(LoadBisection(1, 64, 5, True), capacity=0.5) == [1]
    b = LoadBisection(1, 64, 5, True)
    assert run(b, capacity=100) == [1, 64] and b.met == 64


def test_a_fatal_outcome_ends_the_search():
    b = LoadBisection(1, 64, 5, True)
    b.observe(1, True)
    b.observe(64, False, fatal=True)
    assert b.next_load() is None and b.met == 1


def test_replaying_the_same_outcomes_asks_for_the_same_loads():
    first = run(LoadBisection(1, 48, 4, True), capacity=7)
    assert run(LoadBisection(1, 48, 4, True), capacity=7) == first


@pytest.mark.parametrize("low,high", [(0, 4), (4, 4), (8, 2)])
def test_an_empty_range_is_refused(low, high):
    with pytest.raises(ValueError, match="0 < low < high"):
        LoadBisection(low, high, 3, True)
