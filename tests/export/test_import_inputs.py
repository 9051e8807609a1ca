"""`servelab import` on what users have: gzipped results (servelab's own store), AIPerf's
runs that failed whole and its 0.10 layout, llm-d reports (servelab's and llm-d's shape);
export then import gives every figure back; and a corpus of bad inputs, each refused in one
line naming the file, exit 1, no traceback, nothing written."""
import gzip
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from llmd_roundtrip import mismatches
from servelab import cli
from servelab.export import import_table, llmd_export
from servelab.export.importers import import_file

DATA = Path(__file__).parents[1] / "data"
VLLM_RATE4 = DATA / "vllm_bench_serve_rate4.json"
AIPERF_RATE4 = DATA / "aiperf_profile_export_rate4.json"
BASE_REPORT = DATA / "llmd_corpus/base.yaml"
RECORDED = [DATA / "recorded_gpu/week12_h100", DATA / "recorded_gpu/h200_20261129d_path_whole/study_phi4_path",
            DATA / "recorded_gpu/h200_20261202_certainty/study_phi4_path_l4kv",
            DATA / "recorded_gpu/h100x2_20261126b/week16_run", DATA / "recorded_cpu/week01"]


def test_servelabs_own_gzipped_raw_result_imports_as_its_json():
    store = RECORDED[2] / "store"
    raw = next(p for p in sorted(store.glob("*/bench.json.gz")))
    row = import_file(raw, experiment="e", server_point="gz")
    data = json.loads(gzip.decompress(raw.read_bytes()))
    assert row["ttft_p99_ms"] == data["p99_ttft_ms"] and row["completed"] == data["completed"]


def test_an_aiperf_run_whose_every_request_failed_is_a_row_of_zero_completed(tmp_path):
    data = json.loads(AIPERF_RATE4.read_text())
    failed = {k: data[k] for k in ("schema_version", "aiperf_version", "benchmark_id", "input_config", "start_time",
                                   "end_time", "was_cancelled")}
    failed.update(error_request_count={"unit": "requests", "avg": 5.0}, error_summary=[
        {"error_details": {"code": 500, "type": "InternalServerError", "message": "engine core died"}, "count": 5}])
    (tmp_path / "failed.json").write_text(json.dumps(failed))
    row = import_file(tmp_path / "failed.json", experiment="e", server_point="failed")
    assert (row["completed"], row["failed"], row["valid"]) == (0, 5, False)
    assert row["invalid_reason"] == "AIPerf: 0 of 5 requests completed (5 x InternalServerError: engine core died)"
    assert row["request_rate"] == 4.0 and row["imported_tool"] == "aiperf 0.13.0"


def test_aiperf_0_10_gives_its_prompts_tokens_by_their_statistics_sum(tmp_path):
    data = json.loads(AIPERF_RATE4.read_text())
    data.pop("total_isl")
    data["aiperf_version"] = "0.10.0"
    (tmp_path / "p010.json").write_text(json.dumps(data))
    assert import_file(tmp_path / "p010.json", experiment="e", server_point="x")["total_input_tokens"] == \
        data["input_sequence_length"]["sum"] == 4599


def test_a_report_in_llm_ds_own_shape_imports_with_its_units_and_lax_numbers(tmp_path):
    report = yaml.safe_load(BASE_REPORT.read_text())
    report["run"]["time"] = {"start": "2026-12-01T10:00:00Z", "duration": "PT0M5.840S"}
    report["results"]["observability"] = {}          # not servelab's: no judgement of its own
    latency = report["results"]["request_performance"]["aggregate"]["latency"]
    latency["time_to_first_token"] = {"units": "ms", "mean": "250.5", "p50": 240, "p90": 300, "p99": 400,
                                      "count": 16}    # ms, a numeric string, a key of its own
    itl = latency["inter_token_latency"]   # in ms/token: every statistic x1000
    latency["inter_token_latency"] = {k: v * 1000 if isinstance(v, float) else v for k, v in itl.items()}
    latency["inter_token_latency"]["units"] = "ms/token"
    report["scenario"]["load"]["standardized"].update(concurrency=float("inf"), rate_qps="2.5")
    (tmp_path / "theirs.yaml").write_text(yaml.safe_dump(report))
    row = import_file(tmp_path / "theirs.yaml", experiment="e", server_point="llmd")
    assert row["ttft_mean_ms"] == 250.5 and row["ttft_p99_ms"] == 400 and row["itl_mean_ms"] == itl["mean"] * 1000
    assert row["request_rate"] == 2.5 and row["max_concurrency"] is None and row["duration_s"] == 5.84
    assert row["valid"] is True and row["completed"] == 16 and row["imported_tool"] == "vllm-benchmark 0.26.0"
    # a failed point's report: measured nothing, a row of 0 completed, never valid
    del report["results"]["request_performance"]
    (tmp_path / "failed.yaml").write_text(yaml.safe_dump(report))
    row = import_file(tmp_path / "failed.yaml", experiment="e", server_point="llmd")
    assert (row["completed"], row["valid"]) == (0, False) and "measured nothing" in row["invalid_reason"]


@pytest.mark.parametrize("results", RECORDED, ids=[p.name for p in RECORDED])
def test_export_then_import_gives_every_figure_back(results, tmp_path):
    llmd_export.export(results, tmp_path / "llmd")
    paths = sorted((tmp_path / "llmd").glob("*/benchmark_report_v0.2,_*.yaml"))
    back = import_table.run(paths, tmp_path / "back.csv")["table"]
    assert len(paths) == len(back) > 0
    assert mismatches(paths, back) == []
    # and against the table: counts, throughputs, and the latencies of every point measured once
    table = pd.read_csv(results / "metrics.csv") if (results / "metrics.csv").is_file() else None
    if table is not None:
        rows = {str(r["point_key"]).replace(";", "+"): r for r in table.to_dict("records")}
        for path, got in zip(paths, back.to_dict("records")):
            want = rows[yaml.safe_load(path.read_text())["run"]["uid"]]
            columns = ["completed", "failed", "output_throughput_tps", "request_throughput_rps"] + \
                ([f"{lat}_{s}_ms" for lat in ("ttft", "itl", "tpot", "e2el") for s in ("mean", "p50", "p90", "p99")]
                 if want.get("repeats", 1) == 1 else [])
            for column in columns:
                if pd.notna(want.get(column)):
                    assert got[column] == pytest.approx(want[column], rel=1e-6), (path, column)
            assert bool(got["valid"]) == bool(want["valid"])


def bad_inputs(d: Path) -> dict[str, tuple[Path, str]]:
    """{case: (file, what the refusal says)}: the corpus, written under d."""
    vllm, aiperf = json.loads(VLLM_RATE4.read_text()), json.loads(AIPERF_RATE4.read_text())
    report = yaml.safe_load(BASE_REPORT.read_text())

    def put(name, content) -> Path:
        path = d / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content if isinstance(content, str) else
                            (yaml.safe_dump(content) if name.endswith(".yaml") else json.dumps(content)))
        return path

    def changed(data, **change):
        return {**json.loads(json.dumps(data)), **change}

    def report_with(edit):
        r = json.loads(json.dumps(report))
        edit(r)
        return r

    good_gz = gzip.compress(json.dumps(vllm).encode())
    (d / "a-folder").mkdir(parents=True, exist_ok=True)
    return {
        "empty": (put("empty.json", ""), "is empty"),
        "blank": (put("blank.yaml", " \n\n"), "is empty"),
        "directory": (d / "a-folder", "is a directory"),
        "missing": (d / "nowhere.json", "no such file"),
        "truncated gzip": (put("bench.json.gz", good_gz[:len(good_gz) // 2]), "damaged gzip"),
        "empty gzip": (put("empty.json.gz", gzip.compress(b"")), "is empty"),
        "binary": (put("weights.bin", bytes(range(128, 256))), "is not text"),
        "a JSON list": (put("list.json", [1, 2]), "holds a JSON list"),
        "broken JSON": (put("broken.json", '{"completed": 4,'), "is not JSON"),
        "broken YAML": (put("broken.yaml", "run: [uid: x\nresults: {"), "neither JSON nor YAML"),
        "completed a word": (put("ten.json", changed(vllm, completed="ten")), "completed is 'ten'"),
        "a latency a word": (put("fast.json", changed(vllm, p99_ttft_ms="fast")), "p99_ttft_ms is 'fast'"),
        "completed negative": (put("neg.json", changed(vllm, completed=-3)), "not a count of requests"),
        "request_rate a word": (put("rate.json", changed(vllm, request_rate="fast")), "neither a number nor 'inf'"),
        "a field missing": (put("noduration.json", {k: v for k, v in vllm.items() if k != "duration"}),
                            "it lacks ['duration']"),
        "AIPerf a string statistic": (put("aiperf-str.json", changed(aiperf, time_to_first_token={
            **aiperf["time_to_first_token"], "avg": "21.37"})), "time_to_first_token.avg is '21.37'"),
        "AIPerf latency not a time": (put("aiperf-unit.json", changed(aiperf, time_to_first_token={
            **aiperf["time_to_first_token"], "unit": "tokens"})), "not a unit of time"),
        "AIPerf without throughput": (put("aiperf-nothr.json", {k: v for k, v in aiperf.items()
                                                                if k != "request_throughput"}), "it lacks request_throughput"),
        "llm-d start yesterday": (put("yesterday.yaml", report_with(
            lambda r: r["run"].update(time={"start": "yesterday"}))), "run/time/start: 'yesterday' is not a 'date-time'"),
        "llm-d without uid": (put("nouid.yaml", report_with(lambda r: r["run"].pop("uid"))), "'uid' is a required"),
        "llm-d total a word": (put("total.yaml", report_with(
            lambda r: r["results"]["request_performance"]["aggregate"]["requests"].update(total="ten"))),
            "requests/total: 'ten' is not of type 'integer'"),
        "llm-d version 0.1": (put("v01.yaml", report_with(lambda r: r.update(version="0.1"))), "of version '0.1'"),
    }


def test_every_bad_input_is_refused_in_one_line_naming_the_file(tmp_path, capsys):
    corpus = bad_inputs(tmp_path / "bad")
    assert len(corpus) >= 15
    out = tmp_path / "table.csv"
    for case, (path, why) in corpus.items():
        assert cli.main(["import", str(VLLM_RATE4), str(path), "--out", str(out)]) == 1, case
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(path) in err and why in err, (case, err)
        assert "Traceback" not in err and not out.exists(), case
    assert not list(tmp_path.glob(".table.csv*"))


def test_a_folder_of_reports_imports_with_each_configuration_its_own_name(tmp_path):
    llmd_export.export(RECORDED[0], tmp_path / "llmd")
    paths = sorted((tmp_path / "llmd").glob("*/*.yaml"))
    table = import_table.run(paths, tmp_path / "t.csv", name="h100")["table"]
    # each report names its own configuration (its folder's), kept under --name
    assert list(table["server_point"]) == [f"h100:{yaml.safe_load(p.read_text())['results']['observability']['servelab_point']['identity']['server_point']}" for p in paths]
    assert table["point_key"].is_unique and set(table["experiment"]) == {"week12"}
    shutil.rmtree(tmp_path / "llmd")
