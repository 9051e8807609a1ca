"""A run's end says where its sessions' time went, per experiment and in all."""
import json
import os
import time
from types import SimpleNamespace

from servelab.run import timing
from servelab.serve.session_timing import session_timing


def test_summary_sums_sessions_and_gives_the_overhead_ratio():
    sessions = [{"experiment": "week01", "wall_s": 110.0, "startup_s": 40.0, "points_s": 60.0, "warmup_s": 3.0,
                 "drift_s": 0.0},
                {"experiment": "week03", "wall_s": 50.0, "startup_s": 0.0, "points_s": 48.0, "warmup_s": 0.0,
                 "drift_s": 0.0}]
    text = timing.summary(sessions)
    assert "week01: 1 session(s), wall 110s = start-ups 40s + client points 60s + warm-ups 3s" in text
    # a warm-up and a drift check are runs of the benchmark too: 110 / (40 + 60 + 3)
    assert "wall / (start-ups + benchmark runs) = 1.068" in text
    assert "all: 2 session(s), wall 160s" in text and "= 1.060" in text
    assert timing.summary([]) == ""


def test_the_cost_of_repeats_is_stated_where_there_were_any():
    sessions = [{"experiment": "week01", "wall_s": 200.0, "startup_s": 40.0, "points_s": 150.0, "warmup_s": 3.0,
                 "drift_s": 0.0, "repeats_s": 100.0},
                {"experiment": "week03", "wall_s": 50.0, "startup_s": 0.0, "points_s": 48.0}]
    text = timing.summary(sessions)
    assert "week01: 1 session(s), wall 200s = start-ups 40s + client points 150s (repeats after the first 100s)" in text
    assert "week03: 1 session(s), wall 50s = start-ups 0s + client points 48s + warm-ups" in text
    assert "all: 2 session(s), wall 250s = start-ups 40s + client points 198s (repeats after the first 100s)" in text


def test_waiting_for_gpus_is_a_term_of_its_own_not_the_sessions_overhead():
    """week06 on 4x H100 read "wall 835s ... = 3.046" with four minutes of it queued for a GPU:
    the wait is now apart, so the ratio is the session's own overhead."""
    sessions = [{"experiment": "week06", "wall_s": 290.0, "startup_s": 141.0, "points_s": 72.0, "warmup_s": 61.0,
                 "drift_s": 0.0, "gpu_wait_s": 545.0, "gpus": ["0"]},
                {"experiment": "week06", "wall_s": 10.0, "startup_s": 0.0, "points_s": 9.0}]
    text = timing.summary(sessions, run_wall_s=900.0)
    assert ("week06: 2 session(s), wall 300s = start-ups 141s + client points 81s + warm-ups 61s + drift checks 0s "
            "+ stopping 0s + other; wall / (start-ups + benchmark runs) = 1.060; waited 545s for GPUs (not in wall)") in text
    # the run line stays the whole story: its wall holds the waiting
    assert "run: wall 900s for 300s of session wall" in text
    # so is a session's build of FlashInfer's JIT before its claim (servelab.serve.jit_builds)
    sessions[0]["jit_build_s"] = 93.0
    assert ("waited 545s for GPUs (not in wall); built FlashInfer's JIT 93s before claiming GPUs, none held "
            "(not in wall)") in timing.summary(sessions)


def test_only_the_sessions_of_this_run_are_counted(tmp_path):
    old = tmp_path / "week01/store/sessions/base-1/timing.json"
    new = tmp_path / "week01/store/sessions/base-2/timing.json"
    for path in (old, new):
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"experiment": "week01", "wall_s": 1.0}))
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    assert timing.this_runs(tmp_path, since=time.time() - 60) == [new]


def test_engine_caches_are_keyed_by_engine_torch_and_device(tmp_path):
    from servelab.run import caches

    h100 = caches.stack_key("vllm", "0.26.0", "2.11.0+cu130", "NVIDIA H100 80GB HBM3, 580.159.04")
    assert h100 == "vllm-0.26.0_torch-2.11.0+cu130_NVIDIA_H100_80GB_HBM3_580.159.04"
    assert caches.stack_key("vllm", "0.26.0", "2.11.0+cu130", "NVIDIA H200, 580.159.04") != h100
    assert caches.stack_key("vllm", "0.27.0", "2.11.0+cu130", "NVIDIA H100 80GB HBM3, 580.159.04") != h100
    env = caches.cache_env(tmp_path, h100)
    assert env["VLLM_CACHE_ROOT"] == str(tmp_path / h100 / "vllm")
    assert {env[v] for v in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE")} == {
        str(tmp_path / h100 / name) for name in ("triton", "inductor", "flashinfer")}


def test_sessions_on_another_sessions_engine_are_counted_as_such():
    host = {"experiment": "week01", "wall_s": 60.0, "startup_s": 40.0, "points_s": 19.0}
    guest = {"experiment": "week12", "wall_s": 21.0, "startup_s": 0.0, "points_s": 20.0,
             "shared_engine": {"experiment": "week01", "server_point": "base", "session": "base-1"}}
    text = timing.summary([host, guest])
    assert "week12: 1 session(s) (1 on another session's engine), wall 21s = start-ups 0s" in text
    assert "week01: 1 session(s), wall 60s" in text
    assert "all: 2 session(s) (1 on another session's engine), wall 81s = start-ups 40s + client points 39s" in text


def test_the_run_line_weighs_sessions_by_the_gpus_they_held():
    # two one-GPU sessions side by side on GPUs 0 and 1, then a TP=2 session on both
    sessions = [{"experiment": "week01", "wall_s": 100.0, "startup_s": 60.0, "points_s": 25.0, "warmup_s": 5.0,
                 "gpus": ["0"]},
                {"experiment": "week03", "wall_s": 100.0, "startup_s": 50.0, "points_s": 40.0, "gpus": ["1"]},
                {"experiment": "week13", "wall_s": 50.0, "startup_s": 30.0, "points_s": 10.0, "drift_s": 5.0,
                 "gpus": ["0", "1"]}]
    text = timing.summary(sessions, run_wall_s=160.0)
    # (90 + 90 + 2 x 45) GPU-s over 2 GPUs = 135 s at the least; 160 / 135 = 1.185
    assert "run: wall 160s for 250s of session wall (1.56 sessions at a time on average)" in text
    assert "on 2 GPU(s) (0,1): start-ups + benchmark runs 270 GPU-s / 2 = 135s, run wall / that = 1.185" in text
    # no GPUs (the CPU default): the run's wall against its sessions' only
    cpu = timing.summary([{k: v for k, v in s.items() if k != "gpus"} for s in sessions], run_wall_s=250.0)
    assert cpu.splitlines()[-1] == "  run: wall 250s for 250s of session wall (1.00 sessions at a time on average)"
    assert "run:" not in timing.summary(sessions)
    # on a cluster each node has its GPU 0: two nodes' are two GPUs
    nodes = [{**sessions[0], "host": "n1"}, {**sessions[0], "host": "n2"}]
    assert "on 2 GPU(s) (n1:0,n2:0): start-ups + benchmark runs 180 GPU-s / 2 = 90s" in timing.summary(nodes, 100.0)


def test_the_gpu_seconds_spent_waiting_for_flashinfers_jit_are_named():
    """Slot 2 of the course (2026-11-27): the TP 4 start's 452 s held four GPUs, 303 s of it
    in FlashInfer's JIT builds (its log's spans, servelab.engines.vllm.startup_log.INIT_SPANS)."""
    sessions = [{"experiment": "week13", "wall_s": 480.0, "startup_s": 452.2, "startup_jit_s": 303.0,
                 "points_s": 20.0, "gpus": ["0", "1", "2", "3"]},
                {"experiment": "week01", "wall_s": 100.0, "startup_s": 40.0, "startup_jit_s": 0.4,
                 "points_s": 55.0, "gpus": ["0"]}]
    text = timing.summary(sessions, run_wall_s=600.0)
    assert "week13: 1 session(s), wall 480s = start-ups 452s (FlashInfer JIT builds 303s) + client points 20s" in text
    assert "week01: 1 session(s), wall 100s = start-ups 40s + client points 55s" in text   # warm: under a second
    # weighed by the GPUs held: 4 x 303 + 1 x 0.4
    assert "GPU-s: start-ups 1849 (waiting for FlashInfer JIT builds 1212), benchmark runs 135," in text
    assert "FlashInfer" not in timing.summary([{k: v for k, v in s.items() if k != "startup_jit_s"}
                                               for s in sessions], run_wall_s=600.0)


def test_a_sessions_timing_carries_its_jit_seconds_unless_on_another_sessions_engine(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    spec = SimpleNamespace(experiment="week13", server_point="tensor_parallel_size=4", kind="serve")
    launch = SimpleNamespace(timing={"startup_s": 452.2, "warmup_s": 3.8, "points_s": 20.0, "drift_s": 0.0,
                                     "repeats_s": 0.0}, gpu_wait_s=0.0, gate=None, jit_s=303.0,
                             jit_build_s=0.0)
    own = session_timing(spec, launch, 480.0)
    assert own["startup_jit_s"] == 303.0 and own["gpus"] == ["0", "1", "2", "3"]
    guest = session_timing(spec, launch, 10.0, shared={"experiment": "week12"})
    assert "startup_jit_s" not in guest                    # its host's start, counted there
    assert "startup_jit_s" not in session_timing(spec, SimpleNamespace(**{**vars(launch), "jit_s": 0.0}), 480.0)
