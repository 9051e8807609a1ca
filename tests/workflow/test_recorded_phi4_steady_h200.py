"""Seed 002's tuning study at a steady state on 4x H200, replayed with today's code
(tests/data/recorded_gpu/h200x4_20261128_steady: vLLM 0.26.0, random weights of Phi-4-mini's
shape, `--configfile config/config.yaml config/studies/phi4-steady-gpu.yaml`, single-node profile,
`--resources gpu=8`, 2026-11-28 17:04-17:21, two calls of one run).

Every point was sized in time (duration_s 15): the seed's 50 req/s capped at 250 in flight
sent 750 prompts a point, not its 500. The tables, the SLO judge and goodput here are
computed from the recorded per-request records (send time, TTFT, latency, lengths; the
per-token gaps were left out for size, so the held window spreads each request's tokens
evenly between its first and last). On the box the run judged whole runs: vLLM 0.26's
client saves no latencies, which the window now derives from the streamed tokens. 15 of the
search's and grid's 59 points came back without their per-token gaps (files over the pack's
size): they keep whole-run figures, and their rows say `window: whole run`."""
import json
from pathlib import Path

import pandas as pd
import pytest

from servelab.analysis import metrics
from servelab.stats import t95, welch
from servelab.search import outcome

RUN = Path(__file__).parents[2] / "tests/data/recorded_gpu/h200x4_20261128_steady"
PATH_CONFIGS = ["baseline", "seqs128", "seqs128_fp8kv", "seqs256_fp8kv"]
HELD = "steady_output_throughput_tps"


def path_table(experiment: str) -> pd.DataFrame:
    return metrics.table([RUN / experiment / "sessions" / f"{c}.json" for c in PATH_CONFIGS],
                         RUN / experiment / "store").set_index("server_point")


def step(table: pd.DataFrame, before: str, after: str) -> tuple[float, float, float]:
    """The held output throughput's change from one configuration to the next, in % of the
    first, with its 95 % interval (Welch's t on the 3 repeats each)."""
    a, b = table.loc[before], table.loc[after]
    diff, half = welch(a[HELD], a[f"{HELD}_ci95"] / t95(2), 3, b[HELD], se_b=b[f"{HELD}_ci95"] / t95(2), n_b=3)
    return tuple(100 * x / a[HELD] for x in (diff, diff - half, diff + half))


@pytest.mark.parametrize("experiment", ["study_phi4_path", "study_phi4_path_l4kv"])
def test_every_point_of_the_hand_tuned_path_held_its_load(experiment):
    table = path_table(experiment)
    assert list(table.index) == PATH_CONFIGS and (table["repeats"] == 3).all()
    # sized in time: 50 req/s x 15 s, above the configured floor of 100 prompts
    assert (table["prompts_sent"] == 750).all() and (table["completed"] == 750).all()
    # each repeat's figures from a window of 12-15 s after a ramp of one median request
    assert (table["window"] == "steady").all()
    assert table["steady_window_s"].between(10, 15).all() and (table["steady_requests"] > 300).all()
    assert not table["warnings"].fillna("").str.contains("no steady state").any()
    # the seed's load saturated every configuration: the cap of 250 was reached
    assert table["warnings"].fillna("").str.contains("saturated").all()


def test_the_kv_cache_an_l4_leaves():
    # kv_cache_memory_bytes 13.5e9: a tenth of the whole H200's tokens, twice as many in FP8
    whole, l4 = path_table("study_phi4_path"), path_table("study_phi4_path_l4kv")
    assert whole.loc["seqs128", "kv_cache_tokens"] / l4.loc["seqs128", "kv_cache_tokens"] > 9
    assert l4.loc["seqs128_fp8kv", "kv_cache_tokens"] == pytest.approx(2 * l4.loc["seqs128", "kv_cache_tokens"], rel=0.01)


def test_seed_002s_order_on_an_h200():
    """The seed measured FP8 KV +51 % and 128 -> 256 sequences +18 % on an L4. At 15 s a
    point and 3 repeats the intervals here are wide (+-13 to +-40 %), yet the FP8 step's
    +51 % lies outside its interval on both KV sizes: refuted on this GPU. The sequences
    step's +18 % lies inside: neither confirmed nor refuted."""
    for experiment in ("study_phi4_path", "study_phi4_path_l4kv"):
        table = path_table(experiment)
        _, low, high = step(table, "seqs128", "seqs128_fp8kv")
        assert low < 0 < high and high < 51
        _, low, high = step(table, "seqs128_fp8kv", "seqs256_fp8kv")
        assert low < 18 < high
    assert step(path_table("study_phi4_path_l4kv"), "seqs128", "seqs128_fp8kv")[0] == pytest.approx(5.9, abs=0.5)


def outcomes(experiment: str) -> tuple[dict, dict[str, dict]]:
    """best.json as the run wrote it, and each configuration's outcome judged today."""
    best = json.loads((RUN / experiment / "search/best.json").read_text())
    points: dict[str, list] = {}
    for view in sorted((RUN / experiment / "sessions").glob("*.json")):
        for record in json.loads(view.read_text()):
            bench = RUN / experiment / "store" / record["key"] / "bench.json"
            points.setdefault(record["server_point"], []).append(
                (record, None if record.get("failure") else json.loads(bench.read_text())))
    return best, {sp: outcome.config_outcome(p, "request_rate", best["slo"]) for sp, p in points.items()}


def test_the_search_crowns_what_the_grid_finds_with_fewer_launches():
    search, tried = outcomes("study_phi4_steady_search")
    grid, every = outcomes("study_phi4_steady_grid")
    assert (search["launches"], grid["launches"]) == (3, 8)      # 37.5 % of the grid's launches
    assert search["session_s"] < 0.4 * grid["session_s"]         # 619 of 1648 GPU-seconds
    crowned = tried[search["server_point"]]
    best_of_grid = max(every.values(), key=lambda o: o["goodput_tps"])
    assert crowned["window"] == best_of_grid["window"] == "steady"
    assert crowned["goodput_tps"] >= 0.95 * best_of_grid["goodput_tps"]
    # every configuration of the space met the SLO up to 19-32 req/s, none at 38
    assert {o["max_load"] for o in every.values()} <= {19.0273, 22.6274, 26.9087, 32.0}
