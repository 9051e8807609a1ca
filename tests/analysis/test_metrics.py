"""Parsing a real saved `vllm bench serve --save-result --save-detailed` JSON."""
import json
import math
from pathlib import Path

import pytest

from conftest import REPO
from servelab.analysis import metrics

DATA = REPO / "tests/data"


def test_bench_row_reads_the_saved_json(bench):
    row = metrics.bench_row(bench)
    assert row["completed"] == 40 and row["failed"] == 0
    assert row["duration_s"] == pytest.approx(10.1325, rel=1e-4)
    assert row["ttft_mean_ms"] == pytest.approx(bench["mean_ttft_ms"])
    assert row["ttft_p99_ms"] == pytest.approx(bench["p99_ttft_ms"])
    assert row["e2el_p50_ms"] == pytest.approx(bench["p50_e2el_ms"])
    assert row["output_throughput_tps"] == pytest.approx(bench["output_throughput"])
    assert row["samples_ttft"] == 40
    assert row["samples_itl"] == sum(len(x) for x in bench["itls"]) == 40 * 31
    assert 3.5 < row["achieved_rate_rps"] < 4.5
    for lat in metrics.LATENCIES:
        assert 0 < row[f"{lat}_p50_ms"] <= row[f"{lat}_p99_ms"]


def test_point_row_is_valid_for_a_clean_run(record, bench):
    row = metrics.point_row(record, bench)
    assert row["request_rate"] == 4.0 and row["num_prompts"] == 40
    assert row["max_model_len"] == 2048 and row["enforce_eager"] is True
    assert row["valid"] and row["invalid_reason"] == ""


def test_point_row_flags_failures_and_a_lagging_client(record, bench):
    bench = dict(bench, failed=3, completed=37)
    bench["start_times"] = [i * 0.5 for i in range(40)]  # 2 req/s sent for 4 req/s asked
    row = metrics.point_row(record, bench)
    assert not row["valid"]
    assert "3 failed requests" in row["invalid_reason"]
    assert "completed 37 of 40" in row["invalid_reason"]
    assert "arrival rate 2.00/s below requested 4/s" in row["invalid_reason"]


def test_achieved_rate_edge_cases():
    assert metrics.achieved_arrival_rate([]) is None
    assert metrics.achieved_arrival_rate([1.0, 1.0]) == math.inf
    assert metrics.achieved_arrival_rate([0.0, 1.0, 2.0]) == pytest.approx(1.0)
    assert metrics.requested_rate("inf") == math.inf


def stored(tmp_path: Path, bench: dict, *records: dict) -> tuple[Path, Path]:
    """A store holding the first record's raw JSON, and a view `base.json` of the records."""
    store = tmp_path / "store"
    (store / records[0]["key"]).mkdir(parents=True)
    (store / records[0]["key"] / "bench.json").write_text(json.dumps(bench))
    view = tmp_path / "base.json"
    view.write_text(json.dumps(list(records)))
    return view, store


def test_table_joins_views_with_the_store(tmp_path, record, bench):
    view, store = stored(tmp_path, bench, record)
    table = metrics.table([view], store)
    assert len(table) == 1
    assert table.loc[0, "point_key"] == record["key"]


def test_offline_results_parse():
    latency = metrics.bench_row(json.loads((DATA / "vllm_bench_latency.json").read_text()))
    assert latency["samples_latency"] == 5
    assert 0 < latency["latency_p50_s"] <= latency["latency_p99_s"]
    assert latency["latency_mean_s"] == pytest.approx(0.0596, abs=1e-4)
    throughput = metrics.bench_row(json.loads((DATA / "vllm_bench_throughput.json").read_text()))
    assert throughput["completed"] == 40 and throughput["total_tokens"] == 6419
    assert throughput["total_token_throughput_tps"] == pytest.approx(6419 / throughput["duration_s"], rel=1e-6)


def failed(record: dict, server_point: str = "fp8kv") -> dict:
    return {**record, "server_point": server_point, "key": "f" * 20,
            "failure": {"stage": "server start-up", "exit_code": 1, "log": "server.log",
                        "reason": "NotImplementedError: FP8 KV cache on CPU requires x86 with AVX-512 or AMX."}}


def test_a_failed_point_is_a_row_with_its_knobs_and_the_engine_reason(tmp_path, record, bench):
    view, store = stored(tmp_path, bench, record, failed(record))   # no bench.json for the failed one
    table = metrics.table([view], store)
    assert list(table["valid"]) == [True, False]
    bad = table.iloc[1]
    assert bad["invalid_reason"] == ("server start-up: NotImplementedError: FP8 KV cache on CPU requires "
                                     "x86 with AVX-512 or AMX.")
    assert bad["request_rate"] == table.iloc[0]["request_rate"] and bad["hardware"] == table.iloc[0]["hardware"]
    assert math.isnan(bad["ttft_p50_ms"]) and math.isnan(bad["output_throughput_tps"])


def test_a_view_that_does_not_hold_the_configured_points_is_an_error(tmp_path, record, bench):
    view, store = stored(tmp_path, bench, record)
    configured = {"base": [record["client_knobs"]]}
    assert len(metrics.table([view], store, configured)) == 1
    more = {"base": [record["client_knobs"], {**record["client_knobs"], "request_rate": 2}]}
    with pytest.raises(ValueError, match="holds 1 point"):
        metrics.table([view], store, more)


def test_the_rest_of_a_start_up_is_what_no_phase_accounts_for():
    row = {"server_startup_s": 55.0, "startup_weights_s": 2.0, "startup_engine_init_s": 20.0}
    assert metrics.startup_other_s(row) == 33.0                       # imports and frontend in it
    row.update(startup_imports_s=14.0, startup_frontend_s=15.0)      # the log's times give them
    assert metrics.startup_other_s(row) == 4.0
    assert metrics.startup_other_s({**row, "startup_engine_init_s": None}) is None
    assert metrics.startup_other_s({**row, "server_startup_s": 40.0}) == 0.0   # +-1 s stamps
