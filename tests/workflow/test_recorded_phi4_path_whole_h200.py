"""Seed 002's hand-tuned path with the whole GPU, all four configurations on one H200 box,
replayed with today's code (tests/data/recorded_gpu/h200_20261129d_path_whole: vLLM 0.26.0,
random weights of Phi-4-mini's shape, `--configfile config/config.yaml
config/studies/phi4-steady-gpu.yaml config/studies/phi4-path-gpu.yaml --config 'run=[study_phi4_path]'`,
single-node profile, `--resources gpu=2`, 2026-11-29 10:35-10:51, two calls of one run on one
box: the second measured what the first left).

repeats.csv holds each repeat's row (`metrics.point_row` on each point's bench.json, 9-11 MB
a point, not in the repository); top.log the box's processes over 1 % of a core every 15 s."""
import re
from pathlib import Path

import pandas as pd
import pytest

from servelab.analysis import comparisons
from servelab.analysis.repeats import aggregate

RUN = Path(__file__).parents[2] / "tests/data/recorded_gpu/h200_20261129d_path_whole"
HELD = "steady_output_throughput_tps"


def table() -> pd.DataFrame:
    return pd.read_csv(RUN / "study_phi4_path/metrics.csv")


def repeats() -> pd.DataFrame:
    return pd.read_csv(RUN / "repeats.csv")


def step(before: str, after: str) -> pd.Series:
    t = table()
    pair = t[t["server_point"].isin([before, after])]
    return comparisons.compare(pair, ["request_rate"], baseline=before).set_index("metric").loc["output_throughput_tps"]


def test_every_point_held_its_load_and_each_row_is_its_repeats():
    rows, t = repeats(), table()
    assert len(rows) == 12 and (rows["window"] == "steady").all() and rows["valid"].all()
    assert rows["steady_requests"].between(585, 727).all() and rows["steady_window_s"].between(18, 25).all()
    assert (t["window"] == "steady").all() and (t["repeats"] == 3).all()
    assert not t["warnings"].str.contains("no steady state").any()
    for _, row in t.iterrows():
        mine = rows[rows["server_point"] == row["server_point"]].drop(columns=["experiment", "session"])
        again = aggregate(mine.to_dict("records"))
        assert again[HELD] == pytest.approx(row[HELD], rel=1e-9)
        assert again[f"{HELD}_ci95"] == pytest.approx(row[f"{HELD}_ci95"], rel=1e-9)


def test_the_seeds_order_on_a_whole_h200():
    fewer = step("baseline", "seqs128")           # the seed: +11 %
    assert fewer["verdict"] == "worse" and fewer["diff_pct"] == pytest.approx(-28.1, abs=0.1)
    fp8 = step("seqs128", "seqs128_fp8kv")        # the seed: +51 %, outside the interval
    assert fp8["verdict"] == comparisons.UNDECIDED and fp8["ci95_high_pct"] < 51
    more = step("seqs128_fp8kv", "seqs256_fp8kv")  # the seed: +18 %, inside it, and better
    assert more["verdict"] == "better" and more["ci95_low_pct"] < 18 < more["ci95_high_pct"]
    assert more["diff_pct"] == pytest.approx(38.0, abs=0.1)
    # the whole path ends where it began
    assert step("baseline", "seqs256_fp8kv")["verdict"] == comparisons.UNDECIDED


def test_intervals_within_5_percent_only_where_the_repeats_agree():
    t = table().set_index("server_point")
    width = 100 * t[f"{HELD}_ci95"] / t[HELD]
    assert width["baseline"] < 5 and (width.drop("baseline") > 10).all()
    # one session, one configuration: 128 sequences held 11436, then 8845 and 9387 tok/s
    spread = repeats().groupby("server_point")[HELD].agg(lambda v: v.max() / v.min())
    assert spread["seqs128"] > 1.25 and spread["baseline"] < 1.03


def snapshots() -> list[dict]:
    """top.log as [{"time", "box_user_pct", "engine_core_pct": [...]}]: every 15 s."""
    shots = []
    for line in (RUN / "top.log").read_text().splitlines():
        if re.fullmatch(r"\d\d:\d\d:\d\d", line):
            shots.append({"time": line, "engine_core_pct": []})
        elif line.startswith("%Cpu(s):"):
            shots[-1]["box_user_pct"] = float(line.split()[1])
        elif "VLLM::EngineCor" in line:
            shots[-1]["engine_core_pct"].append(float(line.split()[8]))
    return shots


def test_the_engine_loop_holds_one_core_while_the_box_idles():
    """While a point is measured its engine core is at one core's worth (top's 100 %) and the
    box's 16 cores are 82-94 % idle: the engine's Python loop, not the GPU, sets the step,
    and nothing else on the box competes with it."""
    measuring = [s for s in snapshots() if s["engine_core_pct"] and max(s["engine_core_pct"]) > 50]
    assert len(measuring) >= 25
    busy = [max(s["engine_core_pct"]) for s in measuring]
    assert sum(b >= 90 for b in busy) / len(busy) > 0.8
    assert all(s["box_user_pct"] < 20 for s in measuring)
    rows = repeats()
    assert rows["session_cpu_cores"].between(1.9, 2.4).all() and (rows["outside_cpu_cores"] < 0.35).all()
