"""Seed 002's four configurations and the baseline named twice, in interleaved rounds on one
H200 (issue 90; 2026-12-07, tests/data/recorded_gpu/h200_20261207_rounds): today's code draws
the recorded order from the seed, re-derives every paired verdict from the table, and the A/A
pair's rows and paired interval from its raw results. Beside it, the sequential design of the
same path on an H200 (h200_20261203_bound), compared by the same code."""
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from servelab import stats
from servelab.analysis import comparisons, metrics, paired, repeats
from servelab.raw_result import read_raw
from servelab.serve.rounds import round_order

DATA = Path(__file__).parents[1] / "data/recorded_gpu"
ROUNDS = DATA / "h200_20261207_rounds/study_phi4_rounds_l4kv"
SEQUENTIAL = DATA / "h200_20261203_bound/study_phi4_path_l4kv"
CONFIGURATIONS = ["baseline", "baseline_twin", "seqs128", "seqs128_fp8kv", "seqs256_fp8kv"]


def records(config: str) -> list[dict]:
    return json.loads((ROUNDS / "sessions" / f"{config}.json").read_text())


def test_each_point_was_measured_in_its_rounds_place_drawn_from_the_seed():
    seen, alone = set(), 0
    for config in CONFIGURATIONS:
        for record in records(config):
            turn = record["round"]
            order = round_order(2, turn["index"], CONFIGURATIONS)
            assert turn["order"] == order and order[turn["position"]] == config
            assert record["repeat"] == turn["index"]
            # the others sat idle: under a tenth of a core for all their processes (None: no
            # other server up yet, the first turn of each of the three calls)
            idle = turn["idle_servers_cpu_cores"]
            alone += idle is None
            assert idle is None or 0 <= idle < 0.1
            seen.add((config, turn["index"]))
    assert len(seen) == 15 and alone <= 3
    table = pd.read_csv(ROUNDS / "metrics.csv")
    assert set(table["round_order"]) == {" | ".join(">".join(round_order(2, r, CONFIGURATIONS)) for r in range(3))}


def test_todays_comparisons_re_derive_the_recorded_paired_verdicts():
    table = pd.read_csv(ROUNDS / "metrics.csv")
    again = comparisons.compare(table, [], "baseline", 0.05)
    box = pd.read_csv(ROUNDS / "comparisons.csv")
    cols = ["configuration", "metric", "verdict", "design", "rounds"]
    assert again[cols].astype(str).values.tolist() == box[cols].astype(str).values.tolist()
    assert again["ci95_low_pct"].tolist() == pytest.approx(box["ci95_low_pct"].tolist(), rel=1e-9)
    assert set(again["design"]) == {"interleaved rounds (seed 2)"} and set(again["rounds"]) == {3}
    got = again.set_index(["configuration", "metric"])["verdict"]
    assert got["seqs128", "output_throughput_tps"] == "equivalent within +-5 %"
    assert got["seqs128_fp8kv", "output_throughput_tps"] == "worse"
    assert got["seqs256_fp8kv", "output_throughput_tps"] == "undecided"   # its rounds: 6957, 8268, 9844 tok/s
    assert got["seqs128", "ttft_p50_ms"] == got["seqs128_fp8kv", "ttft_p50_ms"] == "worse"
    # the bounds agree with the sequential run's (h200_20261203_bound)
    bounds = dict(zip(table["server_point"], table["bound"]))
    assert bounds == {"baseline": "KV capacity", "baseline_twin": "KV capacity", "seqs128": "engine core CPU",
                      "seqs128_fp8kv": "engine core CPU", "seqs256_fp8kv": "API server CPU"}


def test_the_a_a_pair_from_its_raw_results():
    """The baseline named twice: rows rebuilt from raw results, paired round by round. Its
    throughput is undecided (+4.4 % [-1.8, +11.1]); its ITL p50 reads 'better' by 9.8 %, the
    twin ahead in each of the three rounds: an A/A false positive on this recording."""
    rows = {}
    for config in ("baseline", "baseline_twin"):
        per_round = []
        for record in records(config):
            row = metrics.point_row(record, read_raw(ROUNDS / "store" / record["key"]))
            assert row["round_index"] == record["round"]["index"]
            per_round.append(row)
        rows[config] = repeats.by_round(per_round)
    table = pd.read_csv(ROUNDS / "metrics.csv").set_index("server_point")
    for config, row in rows.items():
        for metric in ("output_throughput_tps", "itl_p50_ms"):
            assert paired.parse(row[f"{metric}_by_round"]) == pytest.approx(
                paired.parse(table.loc[config, f"{metric}_by_round"]), rel=1e-9)
    found = {}
    for metric in ("output_throughput_tps", "itl_p50_ms"):
        logs = stats.log_ratios(paired.parse(rows["baseline"][f"{metric}_by_round"]),
                                paired.parse(rows["baseline_twin"][f"{metric}_by_round"]))
        found[metric] = stats.paired_interval(logs)
    assert found["output_throughput_tps"]["ci95_low_pct"] < 0 < found["output_throughput_tps"]["ci95_high_pct"]
    assert found["output_throughput_tps"]["diff_pct"] == pytest.approx(4.44, abs=0.01)
    assert -11.2 < found["itl_p50_ms"]["ci95_low_pct"] < found["itl_p50_ms"]["ci95_high_pct"] < -8.4


def test_beside_it_the_sequential_design_of_the_same_path():
    """h200_20261203_bound: the same four configurations, 6 repeats each back to back, 12 s a
    point, each server alone on the H200. Today's code calls it sequential; its intervals after
    6 repeats are wider than the rounds' after 3 for the pair whose rounds were steady."""
    seq = comparisons.compare(pd.read_csv(SEQUENTIAL / "metrics.csv"), [], "baseline", 0.05)
    assert set(seq["design"]) == {comparisons.SEQUENTIAL} and set(seq["repeats"]) == {6}
    rounds = comparisons.compare(pd.read_csv(ROUNDS / "metrics.csv"), [], "baseline", 0.05)

    def width(table, config):
        row = table.set_index(["configuration", "metric"]).loc[(config, "output_throughput_tps")]
        return row["ci95_high_pct"] - row["ci95_low_pct"], row["verdict"]

    seq_width, seq_verdict = width(seq, "seqs128")
    rounds_width, rounds_verdict = width(rounds, "seqs128")
    assert (seq_verdict, rounds_verdict) == ("worse", "equivalent within +-5 %")
    assert rounds_width < seq_width and math.isclose(seq_width, 9.1, abs_tol=0.1)
