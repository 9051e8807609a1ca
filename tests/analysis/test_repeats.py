"""Repeats of a point as one row: means, intervals, and the same columns in every run."""
import json
import os
import subprocess
import sys

from conftest import REPO

from servelab.analysis import repeats

ROWS = [{"server_point": "base", "repeat": r, "valid": True, "ttft_p50_ms": 10.0 + r, "itl_p50_ms": 5.0,
         "output_throughput_tps": 100.0 - r, "e2el_p99_ms": 50.0 + 2 * r, "request_throughput_rps": 2.0,
         "point_key": f"k{r}"} for r in range(3)]


def test_repeats_are_one_row_of_means_with_intervals():
    row = repeats.aggregate(ROWS)
    assert row["repeats"] == 3 and row["ttft_p50_ms"] == 11.0 and row["itl_p50_ms_ci95"] == 0.0
    # t(2) = 4.303 x stdev 1 / sqrt(3)
    assert abs(row["ttft_p50_ms_ci95"] - 4.303 / 3 ** 0.5) < 1e-9
    assert row["point_key"] == "k0;k1;k2"


def test_the_columns_come_in_the_same_order_in_every_process():
    # what a rebuilt table is compared with: the archived one, written by another process
    code = ("import json, sys; from servelab.analysis import repeats; "
            "print(json.dumps(list(repeats.aggregate(json.loads(sys.argv[1])))))")
    orders = {subprocess.run([sys.executable, "-c", code, json.dumps(ROWS)], capture_output=True, text=True,
                             check=True, env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": seed}
                             ).stdout for seed in ("1", "2", "3", "4")}
    assert len(orders) == 1, orders


def test_the_row_counts_the_repeats_that_warned():
    warned = [{**row, "warnings": "saturated: ..." if row["repeat"] == 2 else ""} for row in ROWS]
    row = repeats.aggregate(warned)
    assert row["warned_repeats"] == 1 and row["warnings"] == "repeat 3: saturated: ..."
    assert repeats.aggregate(ROWS)["warned_repeats"] == 0
    # a note every repeat gave is said once; one that some gave, once with those repeats
    drifted = [{**row, "warnings": "drifted" if row["repeat"] else "drifted; saturated"} for row in ROWS]
    assert repeats.aggregate(drifted)["warnings"] == "repeat 1: drifted; saturated; repeats 2, 3: drifted"
    same = repeats.aggregate([{**row, "warnings": "drifted"} for row in ROWS])
    assert same["warnings"] == "every repeat: drifted" and same["warned_repeats"] == 3
    assert repeats.aggregate([{**ROWS[0], "warnings": "x"}])["warned_repeats"] == 1
