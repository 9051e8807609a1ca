"""A search session's load points: chosen by the bisection from what the store holds,
so that a rerun replays the stored points and measures only the rest."""
import json

from servelab.serve.load_search import SearchPoints
from servelab.serve.store import PointStore, identity_hash

SEARCH = {"knob": "max_concurrency", "low": 1, "high": 32, "steps": 3, "slo": {"p99_ttft_ms": 100}}


def identify(knobs):
    identity = {"client": knobs}
    return identity_hash(identity), identity


def measure(store: PointStore, tmp_path, points, capacity: int, fail_at=None) -> list[int]:
    """Store each point the search yields, as a session would: p99 TTFT 50 ms up to
    `capacity` concurrent requests, 500 ms above; `fail_at`: the server dies there."""
    measured = []
    for key, knobs, identity in points:
        load = knobs["max_concurrency"]
        measured.append(load)
        record = {"key": key, "identity": identity, "client_knobs": knobs}
        if load == fail_at:
            record["failure"] = {"stage": "server exited under load", "reason": "RuntimeError: boom"}
            store.save(key, record, {})
            continue
        raw = tmp_path / f"{key}.json"
        raw.write_text(json.dumps({"p99_ttft_ms": 50.0 if load <= capacity else 500.0, "failed": 0}))
        store.save(key, record, {"bench.json": raw})
    return measured


def test_the_search_yields_only_what_the_store_lacks_and_a_rerun_replays_it(tmp_path):
    store = PointStore(tmp_path / "store")
    points = SearchPoints(SEARCH, {"num_prompts": 8}, store, identify)
    assert points.first_knobs == {"num_prompts": 8, "max_concurrency": 1}
    first = measure(store, tmp_path, points, capacity=5)
    assert first == [1, 32, 6, 2, 3]      # low, high, then sqrt-halving within 3 steps
    again = SearchPoints(SEARCH, {"num_prompts": 8}, store, identify)
    assert measure(store, tmp_path, again, capacity=5) == []              # nothing to measure
    assert [k["max_concurrency"] for _, k, _ in again.replay()] == first  # the view: all of them, in order


def test_more_steps_measure_only_the_new_ones(tmp_path):
    store = PointStore(tmp_path / "store")
    measure(store, tmp_path, SearchPoints(SEARCH, {}, store, identify), capacity=5)
    more = SearchPoints({**SEARCH, "steps": 5}, {}, store, identify)
    assert measure(store, tmp_path, more, capacity=5) == [4, 5]
    assert [k["max_concurrency"] for _, k, _ in more.replay()] == [1, 32, 6, 2, 3, 4, 5]


def test_a_server_that_dies_ends_the_bisection_with_one_failed_point(tmp_path):
    store = PointStore(tmp_path / "store")
    points = SearchPoints(SEARCH, {}, store, identify)
    assert measure(store, tmp_path, points, capacity=5, fail_at=32) == [1, 32]
    replayed = points.replay()
    assert [store.load(k).get("failure", {}).get("stage") for k, _, _ in replayed] == \
        [None, "server exited under load"]


def test_a_point_the_session_could_not_store_ends_the_iteration(tmp_path):
    store = PointStore(tmp_path / "store")
    points = SearchPoints(SEARCH, {}, store, identify)
    assert [k["max_concurrency"] for _, k, _ in points] == [1]   # yielded, never stored: no guess at the next
    assert points.replay() == []


def test_retry_failed_measures_a_stored_failure_again_and_the_search_goes_on(tmp_path):
    store = PointStore(tmp_path / "store")
    assert measure(store, tmp_path, SearchPoints(SEARCH, {}, store, identify), capacity=5, fail_at=32) == [1, 32]
    # without retry_failed the failure is replayed: nothing to measure
    assert measure(store, tmp_path, SearchPoints(SEARCH, {}, store, identify), capacity=5) == []
    again = SearchPoints(SEARCH, {}, store, identify, retry_failed=True)
    assert next(iter(again), None) is not None     # a session asks whether anything is left: it is
    assert measure(store, tmp_path, again, capacity=5) == [32, 6, 2, 3]
    assert [k["max_concurrency"] for _, k, _ in again.replay()] == [1, 32, 6, 2, 3]
    assert not any(store.load(k).get("failure") for k, _, _ in again.replay())
