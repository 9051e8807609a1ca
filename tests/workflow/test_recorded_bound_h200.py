"""Seed 002 on one H200 with every point's record of conditions (issue 78; 2026-12-03,
tests/data/recorded_gpu/h200_20261203_bound): today's code derives each row's bound from what
was recorded, and from the records of seqs128 + FP8 KV's six repeats (their raw results
kept) the bound of each repeat and the signal that moved with their spread."""
import json
from pathlib import Path

import pandas as pd
import pytest

from servelab.analysis import bound, metrics, spread
from servelab.raw_result import read_conditions, read_raw

RUN = Path(__file__).parents[1] / "data/recorded_gpu/h200_20261203_bound"
PATH, HOST = RUN / "study_phi4_path_l4kv", RUN / "study_phi4_path_l4kv_host"


def test_every_recorded_row_gets_its_bound_from_what_it_recorded():
    found = {}
    for exp in (PATH, HOST):
        for row in pd.read_csv(exp / "metrics.csv").to_dict("records"):
            assert bound.decide(row) == (row["bound"], row["bound_evidence"]), row["server_point"]
            found[row["server_point"]] = row["bound"]
    assert found == {"baseline": "KV capacity", "seqs128": "engine core CPU", "seqs128_fp8kv": "engine core CPU",
                     "seqs256_fp8kv": "API server CPU", "api2": "engine core CPU", "stream8": "engine core CPU"}


def test_every_point_recorded_its_gpu_at_2_hz_and_its_engine_core_near_a_core():
    for exp in (PATH, HOST):
        for view in (exp / "sessions").glob("*.json"):
            for record in json.loads(view.read_text()):
                conditions = read_conditions(exp / "store" / record["key"])
                assert conditions["gpu_count"] == 1 and conditions["interval_s"] == 0.5
                assert {"engine core", "API server", "client"} <= set(conditions["roles"])
                summary = bound.summary(conditions)
                assert summary["cpu_engine_core_cores"] > 0.85 and summary["gpu_sm_util_pct"] < 80
                # the software power cap held in some ticks of every point, the SM clock at 1920-1980 MHz
                assert summary["gpu_throttle"].startswith("SW power cap in ")
                assert 1900 < summary["gpu_sm_clock_mhz"] < 1990


def test_seqs128_fp8kvs_repeats_each_bound_by_the_engine_core_their_spread_moving_with_the_queue():
    records = json.loads((PATH / "sessions/seqs128_fp8kv.json").read_text())
    rows = []
    for record in records:
        row = metrics.point_row(record, read_raw(PATH / "store" / record["key"]))
        row.update(bound.columns(row, read_conditions(PATH / "store" / record["key"])))
        assert row["bound"] == "engine core CPU", row["bound_evidence"]
        rows.append(row)
    table = pd.read_csv(PATH / "metrics.csv").set_index("server_point").loc["seqs128_fp8kv"]
    assert metrics.repeated(rows)["output_throughput_tps"] == pytest.approx(table["output_throughput_tps"], rel=1e-9)
    explained = spread.explain(rows)
    assert explained["spread_pct"] == pytest.approx(16.81, abs=0.01)
    assert explained["spread_signal"].startswith("requests waiting moved with it: rho -0.94 over 6 repeats")
