"""The held window of a load point: after the ramp, before the drain; its figures from the
per-request records; what the tables, the SLO judge and goodput take from it."""

import json
import random
import statistics
from pathlib import Path

import pytest

from servelab.analysis.metrics import bench_row
from servelab.config.experiments import closed_loop_floor, sized_prompts
from servelab.search import steady_window
from servelab.search import slo

DATA = Path(__file__).parents[1] / "data"


def result(rate=10.0, seconds=30.0, latency=2.0, output=50, ttft=lambda i, t: 0.2, request_rate=None):
    """A saved result of `vllm bench serve` shape: one request every 1/rate s for `seconds`,
    each `latency` s long with `output` tokens streamed evenly after its TTFT."""
    n = int(rate * seconds)
    starts = [i / rate for i in range(n)]
    ttfts = [ttft(i, s) for i, s in enumerate(starts)]
    itls = [[(latency - t) / (output - 1)] * (output - 1) for t in ttfts]
    return {"request_rate": request_rate if request_rate is not None else rate, "start_times": starts,
            "ttfts": ttfts, "itls": itls, "latencies": [latency] * n, "output_lens": [output] * n,
            "input_lens": [100] * n, "errors": [""] * n, "completed": n, "failed": 0, "num_prompts": n,
            # the whole run's figures as the client computes them: ramp and drain included
            "output_throughput": n * output / (starts[-1] + latency), "median_e2el_ms": latency * 1000,
            "p99_ttft_ms": 1000 * max(ttfts), "p99_itl_ms": 1000 * (latency - 0.2) / (output - 1)}


def test_window_is_after_the_ramp_and_before_the_drain():
    bench = result(rate=10, seconds=30, latency=2.0, output=50)
    w = steady_window.window(bench)
    assert w["window_start_s"] == pytest.approx(2.0)        # one median request after the first arrival
    assert w["window_end_s"] == pytest.approx(29.9)         # the last arrival
    assert w["window_requests"] == 280                      # the 21st to the 300th, sent at 2.0 ... 29.9 s
    assert w["no_steady_state"] is None
    # held: 10 req/s x 50 tokens; the whole run's figure is diluted by its ramp and drain
    assert w["output_throughput"] == pytest.approx(500, rel=0.01)
    assert w["request_throughput"] == pytest.approx(10, rel=0.02)
    assert bench["output_throughput"] < 0.95 * w["output_throughput"]
    assert w["p50_ttft_ms"] == pytest.approx(200)


def test_a_burst_has_no_window_to_judge():
    # 20 requests in 0.95 s, each 3 s long: every one in flight at once
    w = steady_window.window(result(rate=20, seconds=1, latency=3.0))
    assert w["no_steady_state"] and "too short to judge" in w["no_steady_state"]
    assert "output_throughput" not in w
    assert steady_window.held(result(rate=20, seconds=1, latency=3.0))["window"] == "whole run"


def test_a_ramp_is_no_growing_queue_but_a_queue_that_grows_in_the_window_is():
    # the first requests find an empty server (fast TTFT), then TTFT settles: a steady state
    ramp = result(seconds=12, ttft=lambda i, t: 0.02 if t < 2.5 else 0.3)
    assert slo.ttft_trend(ramp) > steady_window.TTFT_TREND_LIMIT    # the whole run's thirds say "rising"
    assert steady_window.window(ramp)["no_steady_state"] is None
    assert slo.unheld(ramp) is None
    # over capacity: the server completes 1/1.4 of the arrivals, each request's wait grows
    growing = result(ttft=lambda i, t: 0.1 + 0.4 * t)
    growing["latencies"] = [t + 1.8 for t in growing["ttfts"]]
    assert "the queue grew" in steady_window.window(growing)["no_steady_state"]
    assert "no steady state" in slo.unheld(growing)
    # far over capacity: the ramp outlasts what is left of the arrivals
    flooded = result(ttft=lambda i, t: 0.1 + t)
    flooded["latencies"] = [t + 1.8 for t in flooded["ttfts"]]
    assert "too short to judge" in steady_window.window(flooded)["no_steady_state"]


def test_a_closed_loop_is_not_judged_by_its_ttft_rise():
    # 8 in flight, sent together at first: TTFT rises while they drift apart (seen on the CPU
    # default), but the queue cannot grow past 8; at a rate the same rise is a growing queue
    rising = dict(ttft=lambda i, t: 0.05 + 0.02 * t)
    assert steady_window.window(result(request_rate="inf", **rising))["no_steady_state"] is None
    assert "TTFT rose" in steady_window.window(result(**rising))["no_steady_state"]
    # a rate whose concurrency cap the client reached is a closed loop too
    capped = {**result(**rising), "max_concurrency": 8, "max_concurrent_requests": 8}
    assert steady_window.window(capped)["no_steady_state"] is None


def test_latencies_from_the_streamed_tokens_where_the_client_saves_none():
    # vLLM 0.26's `vllm bench serve` saves TTFTs and inter-token gaps, no latencies
    bench = result()
    older = {k: v for k, v in bench.items() if k != "latencies"}
    assert steady_window.window(older) == steady_window.window(bench)


def test_the_judge_and_goodput_read_the_held_window():
    # the ramp's TTFT outliers (3 s) lie before the window: the held p99 meets a 1 s SLO
    bench = result(ttft=lambda i, t: 1.5 if t < 1 else 0.2)
    bench["p99_ttft_ms"] = 1500.0
    met, margins, why = slo.judge({"p99_ttft_ms": 1000}, bench)
    assert met, why
    assert margins["p99_ttft_ms"] == pytest.approx(800, abs=1)
    assert steady_window.held(bench)["output_throughput"] == pytest.approx(500, rel=0.02)


def test_failed_requests_are_left_out_of_the_window():
    bench = result()
    bench["errors"] = ["boom" if i % 2 else "" for i in range(len(bench["errors"]))]
    w = steady_window.window(bench)
    assert w["window_requests"] == 140
    assert w["output_throughput"] == pytest.approx(250, rel=0.02)


def test_a_recorded_cpu_point_has_its_held_figures_in_the_table_row():
    bench = json.loads((DATA / "vllm_bench_serve_rate4.json").read_text())   # 40 prompts at 4 req/s
    row = bench_row(bench)
    assert row["window"] == "steady"
    assert 30 <= row["steady_requests"] < 40
    assert row["steady_window_s"] == pytest.approx(max(bench["start_times"]) - min(bench["start_times"])
                                                   - bench["median_e2el_ms"] / 1000, rel=0.01)
    # 4 req/s x 32 output tokens held; the whole run's 126 tok/s includes the drain
    assert row["steady_output_throughput_tps"] == pytest.approx(4 * 32, rel=0.25)
    # the held TTFT median: of the requests sent inside the window, counted here apart
    start, end = min(bench["start_times"]) + bench["median_e2el_ms"] / 1000, max(bench["start_times"])
    inside = [t for s, t in zip(bench["start_times"], bench["ttfts"]) if start <= s <= end]
    assert row["steady_requests"] == len(inside)
    assert row["steady_ttft_p50_ms"] == pytest.approx(1000 * statistics.median(inside))


def test_no_per_request_records_no_window():
    assert steady_window.window({"output_throughput": 5.0}) is None
    assert bench_row({"completed": 3})["window"] == "whole run"


@pytest.mark.parametrize("knobs, request_s, expected", [
    # an open loop: its schedule 10 % longer than its duration (the bound stops it at the duration)
    ({"num_prompts": 100, "request_rate": 50, "duration_s": 60}, None, 3301),
    ({"num_prompts": 5000, "request_rate": 50, "duration_s": 60}, None, 5000),     # the least
    # a closed loop: 3x what its slots complete at the warm-up's request time
    ({"num_prompts": 10, "request_rate": "inf", "max_concurrency": 250, "duration_s": 60}, 4.0, 11250),
    # a warm-up that measured nothing: 1 request a slot and second, 3x, at most 20000
    ({"num_prompts": 10, "request_rate": "inf", "max_concurrency": 250, "duration_s": 60}, None, 20000),
    ({"num_prompts": 10, "request_rate": "inf", "max_concurrency": 4, "duration_s": 1}, None, 24),
    # slow requests: never fewer than the floor, 3C + 12 (C at once, up to C more before the
    # window, C at the end, 10 + 2 between)
    ({"num_prompts": 8, "request_rate": "inf", "max_concurrency": 4, "duration_s": 2}, 10.0, 24),
    ({"num_prompts": 8, "request_rate": "inf", "max_concurrency": 1, "duration_s": 2}, 5.0, 15),
    ({"num_prompts": 40, "request_rate": 4}, None, 40),                            # no duration
])
def test_points_sized_in_time(knobs, request_s, expected):
    assert sized_prompts(knobs, request_s) == expected


def test_a_closed_loop_warmed_at_its_load_is_sized_from_what_it_sent_there():
    """The 8B's shape at 128 in flight on an H200 sent 256 requests in its 5 s warm-up at
    load: a 20 s point is given 1.1 x 51.2 x 20 + 128 = 1255, not the 5,324 its low-load
    warm-up's request time asked (768 were sent; sampling the rest took the client 30 s)."""
    knobs = {"num_prompts": 100, "request_rate": "inf", "max_concurrency": 128, "duration_s": 20}
    assert sized_prompts(knobs, 1.44, 256 / 5) == 1255
    assert sized_prompts(knobs, 1.44) > 5000



def closed_loop(prompts: int, concurrency: int, latency: float, output: int = 16) -> dict:
    """A saved result of a closed loop: `concurrency` requests at once, each `latency` s
    long, the next sent as one completes."""
    free, starts = [0.0] * concurrency, []
    for _ in range(prompts):
        t = min(free)
        starts.append(t)
        free[free.index(t)] = t + latency
    n = len(starts)
    return {"request_rate": float("inf"), "max_concurrency": concurrency, "start_times": starts,
            "ttfts": [0.1 * latency] * n, "itls": [[0.9 * latency / (output - 1)] * (output - 1)] * n,
            "latencies": [latency] * n, "output_lens": [output] * n, "input_lens": [100] * n,
            "errors": [""] * n, "completed": n, "failed": 0, "max_concurrent_requests": concurrency}


@pytest.mark.parametrize("concurrency", [1, 4, 16])
@pytest.mark.parametrize("warmup_s, point_s", [(0.3, 0.3), (0.3, 0.9), (0.3, 3.0)])
def test_a_closed_loop_sized_in_time_holds_a_window_however_slow_its_requests(concurrency, warmup_s, point_s):
    """The CPU default's workload matrix sent 8 prompts at 4 in flight: a window of no
    request. Sized in time, a closed loop holds one even where its requests took 10x what
    the warm-up measured (a busy host)."""
    knobs = {"num_prompts": 8, "request_rate": "inf", "max_concurrency": concurrency, "duration_s": 2}
    w = steady_window.window(closed_loop(sized_prompts(knobs, warmup_s), concurrency, point_s))
    assert w["no_steady_state"] is None, w
    assert w["window_requests"] >= steady_window.MIN_REQUESTS
    assert steady_window.window(closed_loop(8, 4, point_s))["no_steady_state"]   # as the default was


def closed_loop_uneven(prompts: int, concurrency: int, rng: random.Random, sigma: float) -> dict:
    """A closed loop whose request times spread log-normally (median 1 s)."""
    free, starts, latencies = [0.0] * concurrency, [], []
    for _ in range(prompts):
        t = min(free)
        starts.append(t)
        latencies.append(rng.lognormvariate(0, sigma))
        free[free.index(t)] = t + latencies[-1]
    n = len(starts)
    return {"request_rate": float("inf"), "max_concurrency": concurrency, "start_times": starts,
            "ttfts": [0.1 * lat for lat in latencies], "itls": [[0.9 * lat / 15] * 15 for lat in latencies],
            "latencies": latencies, "output_lens": [16] * n, "input_lens": [100] * n, "errors": [""] * n,
            "completed": n, "failed": 0, "max_concurrent_requests": concurrency}


def held_requests(prompts: int, concurrency: int, seeds: int = 300, sigma: float = 1.0) -> list[int]:
    return [steady_window.window(closed_loop_uneven(prompts, concurrency, random.Random(seed), sigma))
            ["window_requests"] for seed in range(seeds)]


@pytest.mark.parametrize("concurrency", [1, 2, 4, 8, 16])
def test_a_closed_loops_floor_holds_a_window_however_uneven_its_requests(concurrency):
    """CI's load spread one matrix repeat's request times so that 9 of its 12 (2C + 10 at 1
    in flight) were sent inside the window. The floor holds 10 for times spread far wider
    (log-normal sigma 1: p90/p10 about 13), 300 loops at each concurrency."""
    floor = sized_prompts({"num_prompts": 1, "request_rate": "inf", "max_concurrency": concurrency,
                           "duration_s": 0.001}, 1.0)
    assert floor == closed_loop_floor(concurrency)
    assert min(held_requests(floor, concurrency)) >= steady_window.MIN_REQUESTS
    if concurrency <= 4:   # the floor before: some loops held fewer than 10
        assert min(held_requests(2 * concurrency + 10, concurrency)) < steady_window.MIN_REQUESTS


def test_a_point_sized_in_time_keeps_both_its_duration_and_the_measured_one():
    """The knob `duration_s` (how long to hold the load) and the run's measured `duration_s`
    share a name: the knob's column is `client.duration_s`."""
    from servelab.analysis.metrics import point_row

    bench = json.loads((DATA / "vllm_bench_serve_rate4.json").read_text())
    record = json.loads((DATA / "record_rate4.json").read_text())
    record["client_knobs"] = {**record["client_knobs"], "duration_s": 4}
    row = point_row(record, bench)
    assert row["client.duration_s"] == 4 and row["duration_s"] == pytest.approx(bench["duration"])


def first_requests(bench: dict, count: int) -> dict:
    """The first `count` requests of a saved closed loop, in send order: what a run of
    `count` prompts sends (the drain comes earlier; the load until then is the same)."""
    order = sorted(range(len(bench["start_times"])), key=lambda i: bench["start_times"][i])[:count]
    return {k: [v[i] for i in order] if isinstance(v, list) and len(v) == len(bench["start_times"]) else v
            for k, v in bench.items()}


def test_the_cpu_studys_floor_holds_a_window_where_a_busy_host_bunched_its_requests():
    """CI (2026-11-29) found the CPU study's seqs4 point with no held window: 4 slots for 8 in
    flight beside other work, its requests finish in bunches (17 of 55 sent within 0.9 s,
    then 2.4 s with none). Recorded that way (tests/data), its first 30 requests hold 9 in the
    window; the study's configured floor holds 10 and more."""
    import yaml

    bench = json.loads((DATA / "vllm032_cpu_seqs4_closed_loop_contended.json").read_text())
    local = yaml.safe_load((Path(__file__).parents[2] / "config" / "local.yaml").read_text())
    floor = local["experiments"]["study_tuning_cpu"]["client"]["args"]["num_prompts"]
    assert floor >= closed_loop_floor(8)
    short = steady_window.window(first_requests(bench, 30))
    assert short["window_requests"] < steady_window.MIN_REQUESTS and short["no_steady_state"]
    for count in range(floor, len(bench["start_times"]) + 1):
        held = steady_window.window(first_requests(bench, count))
        assert held["no_steady_state"] is None and held["window_requests"] >= 2 * steady_window.MIN_REQUESTS, count


def test_only_a_closed_loop_sends_past_its_duration_to_its_floor():
    """An open loop capped in flight (seed 002: 50 req/s, 250 at most) sends what its rate
    sends: its floor would have it send 762 where it is given 551 prompts."""
    from servelab.config.experiments import sending_floor

    capped = {"request_rate": 50, "max_concurrency": 250, "duration_s": 10, "num_prompts": 100}
    assert sending_floor(capped) == 0 and sized_prompts(capped, 1.0) == 551
    assert sending_floor({**capped, "request_rate": "inf"}) == closed_loop_floor(250)
    assert sending_floor({"max_concurrency": 8, "duration_s": 4}) == closed_loop_floor(8)
    assert sending_floor({"request_rate": "inf", "duration_s": 4}) == 0
