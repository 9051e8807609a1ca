"""Each measured point as an llm-d benchmark report (0.2.1): exported from real runs' results
(recorded GPU runs; the CPU default's week 1, tests/data/recorded_cpu), every report valid
against the schema, its figures equal to the table's, and bad input refused with nothing written."""
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from servelab import cli
from servelab.analysis import metrics
from servelab.export import llmd, llmd_export, llmd_schema
from servelab.export.llmd_export import ExportError, export

DATA = Path(__file__).parents[1] / "data"
WEEK12_H100 = DATA / "recorded_gpu/week12_h100"                         # store + views, no table
PHI4_H200 = DATA / "recorded_gpu/h200_20261129d_path_whole/study_phi4_path"   # table, records, 3 repeats
WEEK01_CPU = DATA / "recorded_cpu/week01"                              # the CPU default's week 1

pytestmark = pytest.mark.quiet_host


def reports_in(folder: Path) -> dict[str, dict]:
    """{SERVER_POINT/FILE: report} of an export's folder (its YAML reports, as llm-d names them)."""
    return {str(p.relative_to(folder)): yaml.safe_load(p.read_text())
            for p in sorted(folder.glob("**/benchmark_report_v0.2,_*.yaml"))}


def mismatches(reports: dict[str, dict], table: pd.DataFrame) -> list[str]:
    """Each report's TTFT, ITL, TPOT, E2EL (s) against the table's (ms), its throughputs and
    request counts against the table's: a list of every difference."""
    out = []
    rows = {str(r["point_key"]).replace(";", "+"): r for r in table.to_dict("records")}
    assert sorted(rows) == sorted(r["run"]["uid"] for r in reports.values())
    for name, report in reports.items():
        row = rows[report["run"]["uid"]]
        agg = report["results"]["request_performance"]["aggregate"]
        for lat, field in (("ttft", "time_to_first_token"), ("itl", "inter_token_latency"),
                           ("tpot", "time_per_output_token"), ("e2el", "request_latency")):
            for stat in ("mean", "p50", "p90", "p99"):
                got, want = agg["latency"][field][stat] * 1000, row[f"{lat}_{stat}_ms"]
                if got != pytest.approx(want, rel=1e-12):
                    out.append(f"{name} {lat}_{stat}: {got} ms != {want}")
        for column, field in (("output_throughput_tps", "output_token_rate"),
                              ("total_token_throughput_tps", "total_token_rate"),
                              ("request_throughput_rps", "request_rate")):
            if agg["throughput"][field]["mean"] != pytest.approx(row[column], rel=1e-12):
                out.append(f"{name} {column}")
        if agg["requests"]["failures"] != row["failed"] or \
                agg["requests"]["total"] != row["completed"] + row["failed"]:
            out.append(f"{name} requests {agg['requests']} vs completed {row['completed']} failed {row['failed']}")
    return out


def test_a_recorded_h100_run_exports_every_point_valid_and_equal_to_its_table(tmp_path):
    written = export(WEEK12_H100, tmp_path / "llmd")
    reports = reports_in(tmp_path / "llmd")
    assert written == {"week12_h100": 3} and len(reports) == 3
    assert {n: llmd_schema.errors(r) for n, r in reports.items()} == {n: [] for n in reports}
    table = metrics.table(sorted((WEEK12_H100 / "sessions").glob("*.json")), WEEK12_H100 / "store")
    assert mismatches(reports, table) == []
    report = reports["model=llama31_8b_fp8/benchmark_report_v0.2,_stage_0.yaml"]
    engine = report["scenario"]["stack"][0]
    assert engine["standardized"]["tool"] == "vllm" and engine["standardized"]["tool_version"] == "0.26.0"
    assert engine["standardized"]["accelerator"] == {"model": "NVIDIA H100 80GB HBM3", "count": 1,
                                                     "parallelism": {"tp": 1, "dp": 1, "pp": 1, "ep": 1}}
    assert engine["native"]["args"]["quantization"] == "fp8" and "--quantization fp8" in \
        engine["native"]["config"]["serve_command"]
    load = report["scenario"]["load"]["standardized"]
    # request_rate inf: no rate_qps (JSON has no infinity, and the schema wants > 0)
    assert load["tool"] == "vllm-benchmark" and "rate_qps" not in load and load["source"] == "sampled"
    assert report["results"]["request_performance"]["aggregate"]["requests"]["total"] == 16


def test_a_table_of_repeats_exports_their_mean_with_every_repeat_named(tmp_path):
    export(PHI4_H200, tmp_path / "llmd")
    reports = reports_in(tmp_path / "llmd")
    table = pd.read_csv(PHI4_H200 / "metrics.csv")
    assert sorted(reports) == sorted(f"{sp}/benchmark_report_v0.2,_stage_0.yaml" for sp in table["server_point"])
    assert [e for r in reports.values() for e in llmd_schema.errors(r)] == []
    assert mismatches(reports, table) == []
    report = reports["seqs128_fp8kv/benchmark_report_v0.2,_stage_0.yaml"]
    assert len(report["scenario"]["load"]["native"]["config"]["point_keys"]) == 3
    assert report["results"]["observability"]["servelab_point"]["repeats"] == 3
    row = table.set_index("server_point").loc["seqs128_fp8kv"]
    assert report["results"]["observability"]["servelab_point"]["ci95_s"]["ttft_p50"] == \
        pytest.approx(row["ttft_p50_ms_ci95"] / 1000)
    counters = report["results"]["observability"]["engine_counters"]
    assert counters["peak_kv_cache_usage"]["value"] == pytest.approx(row["peak_kv_cache_usage"])
    assert report["results"]["observability"]["components"][0]["aggregate"]["cache_hit_rate"]["mean"] == \
        pytest.approx(row["prefix_cache_hit_rate"])
    # random lengths with a range ratio: uniform about the knob
    assert report["scenario"]["load"]["standardized"]["input_seq_len"] == {
        "distribution": "uniform", "value": 365, "min": 219, "max": 510}
    assert report["scenario"]["load"]["standardized"]["rate_qps"] == 50.0
    assert report["scenario"]["load"]["standardized"]["concurrency"] == 250


@pytest.mark.skipif(not WEEK01_CPU.is_dir(), reason="the CPU default's recorded week 1 is not in this checkout")
def test_the_cpu_defaults_week01_exports_every_point_valid_and_equal_to_its_table(tmp_path):
    export(WEEK01_CPU, tmp_path / "llmd")
    reports = reports_in(tmp_path / "llmd")
    table = pd.read_csv(WEEK01_CPU / "metrics.csv")
    assert len(reports) == len(table) > 0
    assert [e for r in reports.values() for e in llmd_schema.errors(r)] == []
    assert mismatches(reports, table) == []
    for report in reports.values():
        accelerator = report["scenario"]["stack"][0]["standardized"]["accelerator"]
        assert accelerator["count"] == 0 and accelerator["model"].startswith("CPU: ")
        assert report["scenario"]["load"]["standardized"]["tool_version"] == \
            report["scenario"]["stack"][0]["standardized"]["tool_version"]


def test_a_failed_point_is_a_valid_report_that_says_so(tmp_path):
    results = tmp_path / "results/week12"
    shutil.copytree(WEEK12_H100, results)
    view = results / "sessions/model=llama31_8b_awq.json"
    (record,) = json.loads(view.read_text())
    key = record["key"]
    # what servelab.serve.failure stores (record and view) for a server that did not come up
    record["failure"] = {"stage": "server start", "reason": "engine core exited (1)", "exit_code": 1,
                         "log": "store/sessions/x/server.log"}
    (results / "store" / key / "record.json").write_text(json.dumps(record))
    view.write_text(json.dumps([record]))
    (results / "store" / key / "bench.json").unlink()
    export(results, tmp_path / "llmd")
    report = reports_in(tmp_path / "llmd")["model=llama31_8b_awq/benchmark_report_v0.2,_stage_0.yaml"]
    assert llmd_schema.errors(report) == []
    assert "request_performance" not in report["results"]
    assert "failed" in report["run"]["keywords"]
    assert "FAILED (server start: engine core exited (1))" in report["run"]["description"]
    health = report["results"]["component_health"][0]
    assert health["failed_replicas"] == 1 and health["replica_health"][0]["healthy"] is False
    assert health["replica_health"][0]["logs"] == "store/sessions/x/server.log"
    assert report["results"]["observability"]["servelab_point"]["valid"] is False


def test_a_missing_store_entry_names_the_file_and_writes_nothing(tmp_path, capsys):
    results = tmp_path / "results/study_phi4_path"
    shutil.copytree(PHI4_H200, results)
    key = pd.read_csv(results / "metrics.csv")["point_key"][1].split(";")[2]
    (results / "store" / key / "record.json").unlink()
    out = tmp_path / "llmd"
    with pytest.raises(ExportError, match=f"{results / 'store' / key / 'record.json'} is missing"):
        export(results, out)
    assert not out.exists()
    out.mkdir()
    (out / "earlier.json").write_text("{}")
    assert cli.main(["export", str(results), "--out", str(out)]) == 1
    assert "nothing written" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["earlier.json"]   # left as it was
    assert not list(tmp_path.glob(".llmd.tmp*"))


def test_a_missing_raw_result_names_the_point_where_the_table_is_rebuilt(tmp_path):
    results = tmp_path / "results/week12"
    shutil.copytree(WEEK12_H100, results)
    victim = next((results / "store").glob("*/bench.json"))
    victim.unlink()
    with pytest.raises(ExportError, match=victim.parent.name):
        export(results, tmp_path / "llmd")
    assert not (tmp_path / "llmd").exists()


def test_the_schema_refuses_what_llm_d_refuses(tmp_path):
    export(WEEK12_H100, tmp_path / "llmd")
    good = next(iter(reports_in(tmp_path / "llmd").values()))
    assert llmd_schema.errors(good) == []

    def broken(change) -> list[str]:
        report = json.loads(json.dumps(good))
        change(report)
        return llmd_schema.errors(report)

    latency = lambda r: r["results"]["request_performance"]["aggregate"]["latency"]   # noqa: E731
    assert broken(lambda r: latency(r)["time_to_first_token"].update(units="tokens/s"))   # a time in a rate
    assert broken(lambda r: latency(r)["inter_token_latency"].update(units="s"))          # ITL is per token
    assert broken(lambda r: latency(r)["time_to_first_token"].pop("mean"))                # mean is required
    assert broken(lambda r: latency(r).update(ttft_ms=1.0))                                # unknown key
    assert broken(lambda r: r["run"].pop("uid"))
    assert broken(lambda r: r.update(version="0.2"))
    assert broken(lambda r: r["scenario"]["load"]["standardized"].update(rate_qps=0))
    assert broken(lambda r: r["scenario"]["stack"][0]["standardized"].update(role="router"))
    assert broken(lambda r: r["results"]["request_performance"]["aggregate"]["requests"].update(total=-1))
    # observability takes keys of a tool's own, as llm-d's does
    assert not broken(lambda r: r["results"]["observability"].update(anything={"value": 1}))


def test_the_cli_exports_every_experiment_under_results(tmp_path, capsys):
    results = tmp_path / "results"
    shutil.copytree(WEEK12_H100, results / "week12")
    shutil.copytree(PHI4_H200, results / "study_phi4_path")
    assert cli.main(["export", str(results), "--format", "llmd-0.2.1", "--out", str(tmp_path / "all")]) == 0
    assert "7 report(s)" in capsys.readouterr().out
    assert len(reports_in(tmp_path / "all/week12")) == 3
    assert len(reports_in(tmp_path / "all/study_phi4_path")) == 4
    with pytest.raises(ExportError, match="holds no experiment"):
        llmd_export.export(tmp_path / "all", tmp_path / "none")


@pytest.mark.parametrize("bench_file, tool, knobs", [
    ("vllm_bench_latency.json", "latency", {"batch_size": 8, "input_len": 32, "output_len": 16}),
    ("vllm_bench_throughput.json", "throughput", {"num_prompts": 40, "input_len": 64, "output_len": 32}),
])
def test_an_offline_point_exports_what_its_benchmark_measured(bench_file, tool, knobs):
    # a real saved `vllm bench latency|throughput` result, as an offline session's point records it
    record = json.loads(next((WEEK12_H100 / "store").glob("*/record.json")).read_text())
    record["identity"]["kind"], record["client_knobs"] = f"offline:{tool}", knobs
    bench = json.loads((DATA / bench_file).read_text())
    report = llmd.report(metrics.point_row(record, bench), [record])
    assert llmd_schema.errors(report) == []
    load = report["scenario"]["load"]["standardized"]
    assert load["tool"] == f"vllm-bench-{tool}" and load["input_seq_len"] == {"distribution": "fixed", "value":
                                                                               knobs["input_len"]}
    if tool == "latency":   # one batch's latency over its iterations, in s: not a request's, no requests counted
        assert "request_performance" not in report["results"]
        batch = report["results"]["observability"]["servelab_point"]["batch_latency_s"]
        assert batch == {"batch_size": 8, "iterations": len(bench["latencies"]), "mean": bench["avg_latency"],
                         **{f"p{p}": bench["percentiles"][p] for p in ("50", "90", "99")}}
    else:
        aggregate = report["results"]["request_performance"]["aggregate"]
        assert aggregate["requests"]["total"] == bench["num_requests"]
        assert aggregate["throughput"]["request_rate"] == {"units": "queries/s", "mean": bench["requests_per_second"]}
        assert "batch_latency_s" not in report["results"]["observability"]["servelab_point"]


def test_input_lengths_are_what_was_counted_never_a_made_up_zero():
    record = json.loads(next((WEEK12_H100 / "store").glob("*/record.json")).read_text())
    bench = json.loads((DATA / "vllm_bench_throughput.json").read_text())
    # `vllm bench throughput` counts prompt and output tokens together: with a fixed output length
    # a request, the prompts' tokens are the total less the outputs'
    record["identity"]["kind"], record["client_knobs"] = "offline:throughput", {"num_prompts": 40, "output_len": 32}
    report = llmd.report(metrics.point_row(record, bench), [record])
    want = (bench["total_num_tokens"] - 40 * 32) / 40
    assert report["scenario"]["load"]["standardized"]["input_seq_len"] == {"distribution": "other", "value": want}
    assert report["results"]["request_performance"]["aggregate"]["requests"]["input_length"]["mean"] == want
    # static batching (servelab.engines.hf.static_batching) counts the outputs apart
    row = {**metrics.point_row(record, bench), "total_output_tokens": 1000}
    record["client_knobs"] = {"num_prompts": 40}
    report = llmd.report(row, [record])
    assert report["scenario"]["load"]["standardized"]["input_seq_len"]["value"] == (bench["total_num_tokens"] - 1000) / 40
    # nothing counted them: no load section with a 0 in it; the knobs stay in the report
    row.pop("total_output_tokens")
    report = llmd.report(row, [record])
    assert "load" not in report["scenario"] and llmd_schema.errors(report) == []
    assert report["results"]["observability"]["servelab_point"]["load_without_lengths"] == {"num_prompts": 40}


def test_a_pd_pair_is_its_prefill_decode_and_router_with_the_transfers_counted(tmp_path):
    # week 16 on two H100s: vLLM's P/D pair over NIXL behind servelab's proxy (2026-11-26)
    run = DATA / "recorded_gpu/h100x2_20261126b/week16_run"
    export(run, tmp_path / "llmd")
    table = metrics.table(sorted((run / "sessions").glob("*.json")), run / "store")   # its store; no table kept
    reports = reports_in(tmp_path / "llmd")
    assert len(reports) == len(table) and [e for r in reports.values() for e in llmd_schema.errors(r)] == []
    assert mismatches({n: r for n, r in reports.items()}, table) == []
    for report in reports.values():
        stack = report["scenario"]["stack"]
        assert [(c["metadata"]["label"], c["standardized"].get("role"), c["standardized"]["kind"]) for c in stack] \
            == [("vllm-base-prefill", "prefill", "inference_engine"), ("vllm-base-decode", "decode", "inference_engine"),
                ("vllm-base-router", None, "generic")]
        assert stack[0]["native"]["args"]["kv_transfer_config"]["kv_role"] == "kv_producer"
        assert stack[1]["native"]["args"]["kv_transfer_config"]["kv_role"] == "kv_consumer"
        labels = {c["metadata"]["label"] for c in stack}   # every component_label names a component
        assert report["results"]["observability"]["engine_counters"]["component_label"] in labels
        assert {h["component_label"] for h in report["results"]["component_health"]} <= labels
    rows = {str(r["point_key"]): r for r in table.to_dict("records")}
    for report in reports.values():
        counters = report["results"]["observability"]["engine_counters"]
        row = rows[report["run"]["uid"]]
        assert counters["kv_transfers"] == {"value": row["kv_transfers"], "units": "count"} and row["kv_transfers"] > 0
        assert counters["kv_transfer_mean"]["value"] == pytest.approx(row["kv_transfer_mean_ms"] / 1000)


def test_sglangs_replicas_behind_its_router_are_counted(tmp_path):
    run = DATA / "recorded_gpu/h100x2_20261126b/week09_dp_run"
    export(run, tmp_path / "llmd")
    for report in reports_in(tmp_path / "llmd").values():
        assert llmd_schema.errors(report) == []
        engine = report["scenario"]["stack"][0]["standardized"]
        assert engine["tool"] == "sglang" and engine["replicas"] == 2
        assert engine["accelerator"]["count"] == 2 and engine["accelerator"]["parallelism"]["dp"] == 1


def test_a_point_measured_by_aiperfs_conversations_names_aiperf_and_its_turns():
    # week 1's recorded CPU row and record, as issue 72's AIPerf client records a multi-turn point
    row = pd.read_csv(WEEK01_CPU / "metrics.csv").to_dict("records")[0]
    record = json.loads((WEEK01_CPU / "store" / row["point_key"].split(";")[0] / "record.json").read_text())
    record["provenance"]["bench_args"] = "/work/main/.venv-aiperf/bin/aiperf profile --endpoint-type chat --streaming"
    record["client_knobs"] = {"multi_turn": {"conversations": 4, "turns": 3, "users": 2, "prompt_len": 128,
                                             "output_len": 16}, "seed": 0}
    report = llmd.report(row, [record])
    assert llmd_schema.errors(report) == []
    load = report["scenario"]["load"]["standardized"]
    assert (load["tool"], load["source"], load["concurrency"]) == ("aiperf", "random", 2)
    assert load["multi_turn"] == {"enabled": True, "max_turns": {"distribution": "fixed", "value": 3}}
    assert load["output_seq_len"] == {"distribution": "fixed", "value": 16}
    assert load["input_seq_len"]["distribution"] == "other"   # a turn's input holds the conversation so far
    assert report["scenario"]["load"]["native"]["args"] == record["client_knobs"]
