"""Seed 002's hand-tuned path with an L4's KV cache, all four configurations on one H200,
one session measuring at a time, 40 s a point, 3 repeats (baseline 2: the run ended with
the device time), replayed with today's repeats and comparisons
(tests/data/recorded_gpu/h200_20261129b_l4kv_path: vLLM 0.26.0, random weights of
Phi-4-mini's shape, `--configfile config/config.yaml config/studies/phi4-steady-gpu.yaml
config/studies/phi4-l4kv-gpu.yaml`, single-node profile, `--resources gpu=2`, 2026-11-29 03:38-04:04,
three calls of one run resumed from its store).

What came back is each session's `bench.log` (the client's own whole-run summary of each
repeat) and each point's record (the engine's counters: preemptions, peak KV use). The
per-token records (over 8 MiB a point) stayed on the box, and the run was stopped before
its table, so no held-window figure exists for this run: these are whole-run figures
(each point's 2000 prompts, its ramp and drain included: about 8 s and 10 s of 60-93 s).
"""
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from servelab.analysis import comparisons, repeats

RUN = Path(__file__).parents[2] / "tests/data/recorded_gpu/h200_20261129b_l4kv_path/study_phi4_path_l4kv"
# the client's summary lines and the table's names for them
SUMMARY = {"Output token throughput (tok/s)": "output_throughput_tps",
           "Request throughput (req/s)": "request_throughput_rps",
           "Median TTFT (ms)": "ttft_p50_ms", "P99 TTFT (ms)": "ttft_p99_ms",
           "Median ITL (ms)": "itl_p50_ms", "P99 ITL (ms)": "itl_p99_ms"}
SEED_ORDER = ["baseline", "seqs128", "seqs128_fp8kv", "seqs256_fp8kv"]


def repeats_of(bench_log: Path) -> list[dict]:
    """One row per repeat of a session's bench.log (each repeat prints one summary)."""
    rows, row = [], {}
    for line in bench_log.read_text().splitlines():
        name, _, value = line.partition(":")
        if name.strip() in SUMMARY and re.fullmatch(r"\s*[\d.]+\s*", value):
            row[SUMMARY[name.strip()]] = float(value)
        if line.startswith("=" * 20) and len(row) == len(SUMMARY):
            rows.append(row)
            row = {}
    return rows + ([row] if len(row) == len(SUMMARY) else [])


def table() -> pd.DataFrame:
    rows = []
    for config in SEED_ORDER:
        measured = [r for d in sorted((RUN / "store/sessions").glob(f"{config}-*"))
                    for r in repeats_of(d / "bench.log")]
        per_repeat = [{"server_point": config, "request_rate": 50.0, "valid": True, "repeat": i, **r}
                      for i, r in enumerate(measured)]
        rows.append(repeats.aggregate(per_repeat))
    return pd.DataFrame(rows)


def records() -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for path in sorted(RUN.glob("store/*/record.json")):
        record = json.loads(path.read_text())
        out.setdefault(record["server_point"], []).append(record)
    return out


def test_every_repeat_that_ran_is_replayed():
    t = table().set_index("server_point")
    assert t["repeats"].to_dict() == {"baseline": 2, "seqs128": 3, "seqs128_fp8kv": 3, "seqs256_fp8kv": 3}
    assert {k: len(v) for k, v in records().items()} == t["repeats"].to_dict()


def step(t: pd.DataFrame, before: str, after: str) -> pd.Series:
    """The comparison of one step of the seed's path: `after` against `before`."""
    result = comparisons.compare(t[t["server_point"].isin([before, after])], ["request_rate"], before)
    return result.set_index("metric").loc["output_throughput_tps"]


def test_the_seeds_order_does_not_hold_on_an_h200_with_an_l4s_kv_cache():
    t = table()
    # the seed (an L4): 128 sequences +11 % over the baseline's 256. Here -20 %: 256 BF16
    # sequences beat 128 though the cache held ~140 of them and preempted 772-1111 times a
    # point; this GPU's step is not bound by how many sequences fit
    fewer = step(t, "baseline", "seqs128")
    assert fewer["verdict"] == "worse" and fewer["diff_pct"] == pytest.approx(-20.3, abs=0.5)
    # the seed: FP8 KV +51 %. Here the cache at 128 sequences was 36 % used, so halving its
    # bytes bought nothing that the repeats can tell, and +51 % lies far outside the interval
    fp8 = step(t, "seqs128", "seqs128_fp8kv")
    assert fp8["verdict"] == comparisons.UNDECIDED
    assert fp8["ci95_low_pct"] < 0 < fp8["ci95_high_pct"] < 51 / 2
    # the seed: 256 sequences in the FP8 cache +18 %. Here +36 % (61 % of the cache, no
    # preemption): the path's best, 14 % over the baseline
    more = step(t, "seqs128_fp8kv", "seqs256_fp8kv")
    assert more["verdict"] == "better" and more["diff_pct"] == pytest.approx(36.4, abs=0.5)
    assert step(t, "baseline", "seqs256_fp8kv")["verdict"] == "better"


def test_whole_run_intervals_at_3_repeats_are_wider_than_the_held_windows_of_the_run_before():
    # +-8 to +-13 % here (baseline +-22 % at 2 repeats), against +-3.6 and +-9.2 % held at
    # 45 s a point in the run before on another H200 (h200_20261129_fp8kv), whose 128-sequence
    # rows also ran 25-30 % faster: on these boxes the step is set by more than the GPU
    t = table().set_index("server_point")
    widths = 100 * t["output_throughput_tps_ci95"] / t["output_throughput_tps"]
    assert widths.drop("baseline").between(5, 15).all(), widths
    before = pd.read_csv(Path(__file__).parents[2] / "tests/data/recorded_gpu/h200_20261129_fp8kv/"
                         "study_phi4_path_l4kv/metrics.csv").set_index("server_point")
    assert (before["output_throughput_tps"] / t["output_throughput_tps"]).dropna().between(1.15, 1.35).all()


def test_the_engines_counters_say_why():
    recs = records()
    assert all(r["counters"]["preemptions"] > 500 and r["counters"]["peak_kv_cache_usage"] > 0.99
               for r in recs["baseline"])
    for config in ("seqs128", "seqs128_fp8kv", "seqs256_fp8kv"):
        assert all(r["counters"]["preemptions"] == 0 for r in recs[config]), config
    assert max(r["counters"]["peak_kv_cache_usage"] for r in recs["seqs128_fp8kv"]) < 0.4
    # the plan against what the engine reported: +1.6 % KV tokens, both dtypes
    for config, rs in recs.items():
        planned, reported = rs[0]["capacity_plan"]["kv_cache_tokens"], rs[0]["server_facts"]["kv_cache_tokens"]
        assert abs(planned / reported - 1) < 0.05, (config, planned, reported)
