"""Runs made by other tools in servelab's tables: `vllm bench serve --save-result` JSON and
AIPerf's profile_export_aiperf.json read into rows with the table's column names, beside
an experiment's own rows, drawn on its figure and compared with its points."""
import json
from pathlib import Path

import matplotlib.image as mpimg
import pandas as pd
import pytest

from servelab import cli
from servelab.analysis import metrics, plots
from servelab.export.import_table import run
from servelab.export.importers import ImportFailed, import_file

DATA = Path(__file__).parents[1] / "data"
VLLM_RATE4 = DATA / "vllm_bench_serve_rate4.json"        # vllm bench serve of week 1's model at 4 req/s
AIPERF_RATE4 = DATA / "aiperf_profile_export_rate4.json"  # AIPerf's shape, written by hand (docs/export-and-import.md)
WEEK01_CPU = DATA / "recorded_cpu/week01"

pytestmark = pytest.mark.quiet_host


def test_a_vllm_bench_result_is_the_row_servelab_makes_of_its_own_points():
    bench = json.loads(VLLM_RATE4.read_text())
    row = import_file(VLLM_RATE4, experiment="week01", server_point="other-box")
    own = metrics.bench_row(bench)
    assert {k: row[k] for k in own} == own   # the same columns, the same values
    assert row["ttft_p50_ms"] == bench["p50_ttft_ms"] and row["itl_p99_ms"] == bench["p99_itl_ms"]
    assert (row["request_rate"], row["completed"], row["failed"]) == (4.0, 40, 0)
    assert row["valid"] is True and row["model"] == "servelab-week01"


def test_aiperfs_statistics_land_in_the_columns_that_mean_the_same():
    row = import_file(AIPERF_RATE4, experiment="week01", server_point="aiperf")
    data = json.loads(AIPERF_RATE4.read_text())
    assert row["ttft_mean_ms"] == data["time_to_first_token"]["avg"]
    assert row["ttft_p99_ms"] == data["time_to_first_token"]["p99"]
    # AIPerf's per-request inter_token_latency is vLLM's TPOT; its chunk gaps are vLLM's ITL
    assert row["tpot_p50_ms"] == data["inter_token_latency"]["p50"]
    assert row["itl_p50_ms"] == data["inter_chunk_latency"]["p50"]
    assert row["e2el_p90_ms"] == data["request_latency"]["p90"]
    assert row["duration_s"] == pytest.approx(10.1735)
    assert (row["completed"], row["failed"], row["request_rate"], row["num_prompts"]) == (40, 0, 4.0, 40)
    assert row["output_throughput_tps"] == 125.82 and row["model"] == "servelab-week01"
    assert row["valid"] is True


def test_a_real_aiperf_export_reads_with_its_requests_counted_by_its_records():
    # AIPerf's own saved output of a multi-turn run (tests/data/aiperf_multiturn, issue 72's client):
    # no request_count, no input_config in it; schema 1.4's `count` says how many requests completed
    real = DATA / "aiperf_multiturn/profile_export_aiperf.json"
    data = json.loads(real.read_text())
    row = import_file(real, experiment="e", server_point="aiperf")
    assert row["completed"] == data["time_to_first_token"]["count"] == 12 and row["failed"] == 0
    assert row["ttft_p50_ms"] == data["time_to_first_token"]["p50"]
    assert row["tpot_p99_ms"] == data["inter_token_latency"]["p99"] and row["itl_p99_ms"] is None
    assert row["request_rate"] is None and row["total_output_tokens"] == 200.0
    assert row["duration_s"] == pytest.approx(data["benchmark_duration"]["avg"])


def test_an_earlier_aiperf_layout_and_units_are_converted(tmp_path):
    data = json.loads(AIPERF_RATE4.read_text())
    data["time_to_first_token"] = {"unit": "sec", "avg": 0.02, "p50": 0.018, "p90": 0.03, "p99": 0.05}
    data["error_request_count"] = {"unit": "requests", "avg": 2.0}
    data["input_config"] = {"endpoint": {"model_names": ["m"]}, "loadgen": {"concurrency": 8, "request_count": 42}}
    (tmp_path / "old.json").write_text(json.dumps(data))
    row = import_file(tmp_path / "old.json", experiment="e", server_point="old")
    assert row["ttft_p50_ms"] == pytest.approx(18.0) and row["model"] == "m"
    assert (row["max_concurrency"], row["failed"], row["prompts_sent"]) == (8, 2, 42)
    assert row["valid"] is False and "2 failed requests" in row["invalid_reason"]


@pytest.mark.parametrize("content, message", [
    ([1, 2], "holds a JSON list"),
    ({"elapsed_time": 1.0, "num_requests": 4}, "is neither a `vllm bench serve"),
    ("{not json", "is not JSON"),
    ({"completed": 4, "duration": 1.0, "request_throughput": 4.0, "output_throughput": 1.0, "mean_ttft_ms": 1.0},
     r"it lacks \['p99_ttft_ms'\]"),
])
def test_a_foreign_file_of_the_wrong_shape_is_refused_by_name_and_nothing_written(tmp_path, capsys, content,
                                                                                  message):
    bad = tmp_path / "foreign.json"
    bad.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(ImportFailed, match=message):
        import_file(bad, experiment="e", server_point="x")
    out = tmp_path / "table.csv"
    assert cli.main(["import", str(VLLM_RATE4), str(bad), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert str(bad) in err and "nothing written" in err
    assert not out.exists() and not list(tmp_path.glob(".table.csv.tmp*"))


def test_an_aiperf_latency_not_in_a_unit_of_time_is_refused(tmp_path):
    data = json.loads(AIPERF_RATE4.read_text())
    data["time_to_first_token"]["unit"] = "tokens"
    (tmp_path / "p.json").write_text(json.dumps(data))
    with pytest.raises(ImportFailed, match="time_to_first_token is in 'tokens'"):
        import_file(tmp_path / "p.json", experiment="e", server_point="x")


@pytest.mark.skipif(not WEEK01_CPU.is_dir(), reason="the CPU default's recorded week 1 is not in this checkout")
def test_an_imported_run_of_the_same_load_joins_the_table_figure_and_comparisons(tmp_path):
    own = pd.read_csv(WEEK01_CPU / "metrics.csv")
    out, compared = tmp_path / "week01-with-other.csv", tmp_path / "week01-vs-other.csv"
    assert cli.main(["import", str(VLLM_RATE4), "--name", "other-box", "--beside", str(WEEK01_CPU / "metrics.csv"),
                     "--out", str(out), "--comparisons", str(compared)]) == 0
    table = pd.read_csv(out)
    assert list(table.columns[:len(own.columns)]) == list(own.columns)   # servelab's columns, in its order
    assert len(table) == len(own) + 1
    other = table[table["server_point"] == "other-box"].iloc[0]
    assert other["experiment"] == "week01" and other["request_rate"] == 4.0 and bool(other["valid"])
    comparisons = pd.read_csv(compared)
    assert set(comparisons["configuration"]) == {"other-box"} and set(comparisons["baseline"]) == {"base"}
    assert set(comparisons["load_point"]) == {"request_rate=4.0"}
    assert {"ttft_p50_ms", "itl_p50_ms", "output_throughput_tps"} <= set(comparisons["metric"])
    ttft = comparisons.set_index("metric").loc["ttft_p50_ms"]
    base = own[own["request_rate"] == 4.0].iloc[0]
    assert ttft["baseline_mean"] == pytest.approx(base["ttft_p50_ms"])
    assert ttft["mean"] == pytest.approx(json.loads(VLLM_RATE4.read_text())["p50_ttft_ms"])
    # the same figure as the experiment's own, with the imported run as a hue of its own
    spec = {"x": "request_rate", "y": "ttft_p50_ms", "hue": "server_point", "xlabel": "Request rate (req/s)",
            "ylabel": "TTFT p50 (ms)", "title": "week 1 beside another box"}
    png = plots.draw(table, spec, tmp_path / "ttft.png")
    assert mpimg.imread(png).shape[0] > 200


def test_two_tools_runs_side_by_side_compare_without_a_servelab_table(tmp_path):
    result = run([VLLM_RATE4, AIPERF_RATE4], tmp_path / "t.csv", name="box",
                 comparisons_out=tmp_path / "c.csv")
    table = result["table"]
    assert list(table["server_point"]) == ["box:vllm_bench_serve_rate4", "box:aiperf_profile_export_rate4"]
    comparisons = pd.read_csv(tmp_path / "c.csv")
    assert set(comparisons["load_point"]) == {"request_rate=4.0"} and len(comparisons) >= 4
