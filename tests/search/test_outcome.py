"""From a search's stored points to each configuration's goodput, the next round, the
table of every configuration tried and the best one with its `vllm serve` command."""
import json

import pytest

from conftest import REPO
from servelab.config.experiments import point_id
from servelab.search import outcome, progress

# a real saved result, its whole-run figures then set by each test: without its per-request
# records, which would give the held window's own figures (tests/engines/test_steady_window.py)
BENCH = {k: v for k, v in json.loads((REPO / "tests/data/vllm_bench_serve_rate4.json").read_text()).items()
         if k not in ("start_times", "ttfts", "itls", "latencies", "output_lens", "input_lens", "errors")}
SEARCH = {"space": {"max_num_seqs": [1, 4, 16]}, "load": {"knob": "max_concurrency", "low": 1, "high": 32},
          "slo": {"p99_ttft_ms": 200}, "strategy": "coordinate"}
COMMAND = ("/venv/bin/python -m servelab.engines.vllm.cli serve /models/tiny --host 127.0.0.1 --port 41234 "
           "--served-model-name servelab-s --max-num-seqs {seqs} --override-generation-config '{{\"top_k\": 1}}'")


def session(tmp_path, seqs: int, ttft_by_load: dict, refused: str | None = None, startup_s: float = 0.0,
            point_s: float = 0.0) -> str:
    """A session view and its stored points, as the session rule writes them."""
    view, store = [], tmp_path / "store"
    for n, (load, ttft) in enumerate(ttft_by_load.items()):
        key = f"k{seqs}_{n}"
        record = {"key": key, "client_knobs": {"num_prompts": 64, "max_concurrency": load},
                  "session": f"s{seqs}", "server_startup_s": startup_s, "client_wall_s": point_s,
                  "provenance": {"serve_command": COMMAND.format(seqs=seqs)}}
        (store / key).mkdir(parents=True)
        if refused:
            record["failure"] = {"stage": "server start-up", "reason": refused}
        else:
            (store / key / "bench.json").write_text(json.dumps({**BENCH, "p99_ttft_ms": ttft, "failed": 0,
                                                                "output_throughput": 10.0 * load}))
        view.append(record)
    path = tmp_path / "sessions" / f"{point_id({'max_num_seqs': seqs})}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(view))
    return str(path)


def test_goodput_is_the_throughput_at_the_highest_load_that_met_the_slo(tmp_path):
    view = session(tmp_path, 4, {1: 50.0, 32: 900.0, 6: 150.0, 16: 400.0})
    o = outcome.config_outcome(outcome.read_view(view, tmp_path / "store"), "max_concurrency", SEARCH["slo"])
    assert o["max_load"] == 6 and o["goodput_tps"] == 60.0 and o["margins"] == {"p99_ttft_ms": 50.0}
    assert o["limited_by"] == "at max_concurrency=16: p99_ttft_ms 400.0 > 200"
    assert o["points"] == 4


def test_a_refused_configuration_has_no_goodput_and_keeps_the_engine_reason(tmp_path):
    view = session(tmp_path, 1, {1: 0.0}, refused="ValueError: max_num_seqs too small")
    o = outcome.config_outcome(outcome.read_view(view, tmp_path / "store"), "max_concurrency", SEARCH["slo"])
    assert o["goodput_tps"] == 0.0 and o["max_load"] is None
    assert "server start-up: ValueError: max_num_seqs too small" in o["limited_by"]


def test_rounds_plan_from_what_was_measured_and_the_summary_names_the_best(tmp_path):
    store = str(tmp_path / "store")
    round0 = progress.plan_round(0, SEARCH, [], [], store_dir=store)
    assert round0["configs"] == [{"max_num_seqs": 4}] and round0["best_so_far"] is None
    views = [session(tmp_path, 4, {1: 50.0, 32: 900.0, 6: 150.0})]
    round1 = progress.plan_round(1, SEARCH, [round0], views, store_dir=store)
    assert round1["configs"] == [{"max_num_seqs": 1}, {"max_num_seqs": 16}]
    assert round1["best_so_far"] == {"config": {"max_num_seqs": 4}, "goodput_tps": 60.0}
    views += [session(tmp_path, 1, {1: 0.0}, refused="ValueError: no"), session(tmp_path, 16, {1: 40.0, 32: 120.0})]
    round2 = progress.plan_round(2, SEARCH, [round0, round1], views, store_dir=store)
    assert round2["configs"] == [] and round2["last_reason"].startswith("converged")
    rows, best = progress.summary(SEARCH, [round0, round1, round2], views, store)
    assert [(r["round"], r["server_point"], r["goodput_tps"]) for r in rows] == [
        (0, "max_num_seqs=4", 60.0), (1, "max_num_seqs=1", 0.0), (1, "max_num_seqs=16", 320.0)]
    assert best["server_point"] == "max_num_seqs=16" and best["max_load"] == {"max_concurrency": 32}
    assert best["launches"] == 3 and best["rounds"] == 2 and best["stopped"].startswith("converged")
    assert best["vllm_serve"] == ("vllm serve /models/tiny --max-num-seqs 16 "
                                  "--override-generation-config '{\"top_k\": 1}'")


def test_a_search_where_nothing_met_the_slo_says_so(tmp_path):
    views = [session(tmp_path, 4, {1: 900.0})]
    plan = {"round": 0, "configs": [{"max_num_seqs": 4}], "last_reason": ""}
    rows, best = progress.summary(SEARCH, [plan, {"round": 1, "configs": [], "last_reason": "x"}], views,
                                  str(tmp_path / "store"))
    assert not best["found"] and best["launches"] == 1 and "met the SLO" in best["reason"]
    assert rows[0]["limited_by"] == "at max_concurrency=1: p99_ttft_ms 900.0 > 200"


def test_a_time_budget_cuts_the_next_round_to_what_fits_and_then_ends_the_search(tmp_path):
    space = {"max_num_seqs": [1, 2, 4, 8, 16]}
    search = {**SEARCH, "space": space, "start": {"max_num_seqs": 4}, "budget": {"session_s": 200}}
    store = str(tmp_path / "store")
    round0 = progress.plan_round(0, search, [], [], store_dir=store)
    assert round0["configs"] == [{"max_num_seqs": 4}]            # nothing measured yet: never cut
    # one launch: a 60 s start-up and three points of 10 s (the start-up counted once)
    views = [session(tmp_path, 4, {1: 50.0, 16: 400.0, 6: 150.0}, startup_s=60.0, point_s=10.0)]
    round1 = progress.plan_round(1, search, [round0], views, store_dir=store)
    assert round1["session_s_so_far"] == 90.0
    assert round1["configs"] == [{"max_num_seqs": 2}]           # 110 s left fit one 90 s launch, not two
    views.append(session(tmp_path, 2, {1: 60.0, 16: 300.0}, startup_s=50.0, point_s=5.0))
    round2 = progress.plan_round(2, search, [round0, round1], views, store_dir=store)
    assert round2["configs"] == []
    assert round2["last_reason"] == "the time budget is spent: 150 s of 200 s used, a launch has taken 75 s"
    rows, best = progress.summary(search, [round0, round1, round2], views, store)
    assert [r["session_s"] for r in rows] == [90.0, 60.0] and best["session_s"] == 150.0
    assert "150 s of server time" in progress.describe_best("s", best)
    # without the time budget the same measurements go on to the untried neighbour
    assert progress.plan_round(2, SEARCH | {"space": space, "start": {"max_num_seqs": 4}}, [round0, round1],
                               views, store_dir=store)["configs"] == [{"max_num_seqs": 8}]


def test_goodputs_within_noise_are_ties_and_the_cheapest_wins():
    search = {"space": {"max_num_seqs": [4, 8, 16, 32], "tensor_parallel_size": [1, 2]},
              "load": {"knob": "request_rate"}, "slo": {"p99_ttft_ms": 500}, "strategy": "grid"}

    def row(seqs, tp, goodput):
        return {"round": 0, "server_point": f"max_num_seqs={seqs}+tensor_parallel_size={tp}",
                "max_num_seqs": seqs, "tensor_parallel_size": tp, "goodput_tps": goodput, "session_s": 1.0}

    def found(rows, drift=None):
        return {r["server_point"]: {"goodput_tps": r["goodput_tps"], "request_throughput_rps": 1.0, "max_load": 4,
                                    "margins": {}, "limited_by": "", "serve_command": None, "drift": drift}
                for r in rows}

    # the week 8 search on an H100 gave 1413, 1489 and 1484 tok/s: 1484 is within 5 % of 1489
    rows = [row(8, 1, 1413.0), row(16, 2, 1489.0), row(32, 1, 1484.0)]
    best = outcome.best_config(rows, found(rows), search)
    assert best["highest_goodput"] == {"server_point": "max_num_seqs=16+tensor_parallel_size=2", "goodput_tps": 1489.0}
    # 1413 is 5.1 % below: not a tie
    assert set(best["ties"]) == {"max_num_seqs=16+tensor_parallel_size=2", "max_num_seqs=32+tensor_parallel_size=1"}
    assert best["server_point"] == "max_num_seqs=32+tensor_parallel_size=1"   # one GPU, not two
    assert "cheapest" in best["rule"] and best["tie_within"] == 0.05
    # a tighter noise separates them; the highest then wins alone
    best = outcome.best_config(rows, found(rows), {**search, "tie_within": 0.001})
    assert best["ties"] == ["max_num_seqs=16+tensor_parallel_size=2"]
    assert best["server_point"] == "max_num_seqs=16+tensor_parallel_size=2"
    # a session's measured drift widens the noise it is judged with
    best = outcome.best_config(rows, found(rows, drift=0.147), {**search, "tie_within": 0.001})
    assert best["tie_within"] == 0.147 and len(best["ties"]) == 3
    assert best["server_point"] == "max_num_seqs=8+tensor_parallel_size=1"    # one GPU, at the start


def confirm_view(tmp_path, seqs: int, load: int, throughputs: list[float], tag: str = "") -> str:
    """The view of a frontier configuration's repeats at its goodput load, as rule
    search_confirm writes it (`tag`: one set of such views beside others)."""
    view, store = [], tmp_path / "store"
    for n, tps in enumerate(throughputs):
        key = f"c{tag}{seqs}_{n}"
        (store / key).mkdir(parents=True)
        (store / key / "bench.json").write_text(json.dumps({**BENCH, "p99_ttft_ms": 50.0, "failed": 0,
                                                            "output_throughput": tps}))
        view.append({"key": key, "client_knobs": {"num_prompts": 64, "max_concurrency": load}})
    path = tmp_path / f"confirm{tag}" / f"{point_id({'max_num_seqs': seqs})}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(view))
    return str(path)


def grid_search(tmp_path, **search):
    """A grid over max_num_seqs 1, 4, 16 whose single measurements give 300, 310 and 100 tok/s
    at 30, 31 and 10 concurrent requests: 4 and 1 are within the 5 % noise of each other."""
    search = {**SEARCH, "strategy": "grid", **search}
    store = str(tmp_path / "store")
    round0 = progress.plan_round(0, search, [], [], store_dir=store)
    views = [session(tmp_path, 1, {30: 50.0}), session(tmp_path, 4, {31: 50.0}), session(tmp_path, 16, {10: 50.0})]
    round1 = progress.plan_round(1, search, [round0], views, store_dir=store)
    return search, [round0, round1], views, store


def test_the_last_round_names_the_frontier_to_measure_again(tmp_path):
    search, plans, views, store = grid_search(tmp_path)
    assert plans[1]["configs"] == [] and plans[1]["last_reason"] == "the grid is complete"
    assert [(c["server_point"], c["load"]) for c in plans[1]["confirm"]] == [("max_num_seqs=4", 31),
                                                                             ("max_num_seqs=1", 30)]
    # repeats switched off, or nothing to decide: no confirmation
    assert "confirm" not in grid_search(tmp_path / "off", confirm_repeats=1)[1][1]
    alone = progress.plan_round(1, SEARCH, [{"round": 0, "configs": [{"max_num_seqs": 4}]}],
                                [session(tmp_path / "alone", 4, {1: 50.0})], store_dir=str(tmp_path / "alone/store"))
    assert "confirm" not in alone


def test_repeats_crown_the_higher_only_when_it_is_distinguishably_higher(tmp_path):
    search, plans, views, store = grid_search(tmp_path)
    # steady repeats: 4 is higher beyond noise, so it wins although 1 is within 5 % and cheaper
    steady = [confirm_view(tmp_path, 4, 31, [310.0, 311.0, 309.5]), confirm_view(tmp_path, 1, 30, [300.0, 301.0, 299.0])]
    _, best = progress.summary(search, plans, views, store, confirm_views=steady)
    assert best["server_point"] == "max_num_seqs=4" and best["ties"] == ["max_num_seqs=4"]
    decision = best["confirmation"]
    assert decision["verdict"] == "distinguishable" and decision["ci95_pct"][1] < 0
    assert decision["configs"]["max_num_seqs=1"]["slo_met"] == "3/3"
    assert best["goodput_tps"] == pytest.approx(310.1666, rel=1e-4)    # the mean of its repeats
    assert "frontier confirmed" in progress.describe_best("s", best)
    # noisy repeats: a tie, the cheapest of the two (knobs nearest the start, 4) wins
    noisy = [confirm_view(tmp_path, 4, 31, [310.0, 250.0, 350.0], "n"), confirm_view(tmp_path, 1, 30, [300.0, 280.0, 320.0], "n")]
    _, best = progress.summary(search, plans, views, store, confirm_views=noisy)
    assert best["confirmation"]["verdict"] == "undecided"   # +-20 %: cannot tell equal from not
    assert set(best["ties"]) == {"max_num_seqs=4", "max_num_seqs=1"}
    # tight repeats 0.3 % apart: not distinguishable, and equal within the search's tie_within (5 %)
    same = [confirm_view(tmp_path, 4, 31, [300.0, 301.0, 299.0], "e"), confirm_view(tmp_path, 1, 30, [301.0, 300.0, 301.5], "e")]
    _, best = progress.summary(search, plans, views, store, confirm_views=same)
    assert best["confirmation"]["verdict"] == "equivalent within +-5 %"
    assert -5 < best["confirmation"]["ci90_pct"][0] < best["confirmation"]["ci90_pct"][1] < 5
    # the runner-up distinguishably higher over its repeats: the single measurements misled
    turned = [confirm_view(tmp_path, 4, 31, [290.0, 291.0, 289.0], "t"), confirm_view(tmp_path, 1, 30, [300.0, 301.0, 299.0], "t")]
    _, best = progress.summary(search, plans, views, store, confirm_views=turned)
    assert best["server_point"] == "max_num_seqs=1" and best["confirmation"]["higher"] == "max_num_seqs=1"
