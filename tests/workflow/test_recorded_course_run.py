"""The whole course from one command on a lent 4x H100 (tests/data/recorded_gpu/
h100x4_20261127c: config/gpu-check.yaml with run_what_fits, single-node profile, vLLM 0.26.0
+ lm-eval 0.4.13 + LMCache 0.5.6 and SGLang 0.5.17 from envs/offline-gpu), replayed: what it
left out, what the compile gate saved, where the GPU-seconds went, and the two faults it
showed (a gated stack start, a starved TP 4 claim) that the code since fixes."""
import re
from pathlib import Path

import pandas as pd
import pytest

from helpers import recorded_run
from servelab.run import timing

RUN = Path(__file__).parents[1] / "data/recorded_gpu/h100x4_20261127c"


@pytest.fixture(scope="module")
def timings():
    return recorded_run.timings(RUN)


@pytest.fixture(scope="module")
def tables():
    return recorded_run.tables(RUN)


def test_every_measured_row_is_valid_both_engines(tables):
    rows = pd.concat(tables.values())
    assert len(rows) == 45 and rows["valid"].all()
    assert {"0.26.0", "0.5.17"} <= set(rows["engine_version"].astype(str))   # vLLM and SGLang
    assert (rows["hardware"].str.startswith("NVIDIA H100 80GB HBM3")).all()


def test_the_second_start_of_a_compile_key_started_warm_and_faster(timings, tables):
    week05 = [t for t in timings if t["experiment"] == "week05"]
    assert sorted(t["compile"] for t in week05) == ["cold", "cold", "warm", "warm"]
    starts = tables["week05"].drop_duplicates("server_point").set_index("server_point")
    for dtype in ("auto", "fp8"):   # prefix caching compiles nothing: on and off share a key
        cold = starts.loc[f"enable_prefix_caching=false+kv_cache_dtype={dtype}"]
        warm = starts.loc[f"enable_prefix_caching=true+kv_cache_dtype={dtype}"]
        assert warm["startup_compile_s"] < cold["startup_compile_s"] / 2
        assert warm["server_startup_s"] < cold["server_startup_s"]


def test_where_the_gpu_seconds_went(timings):
    """servelab's own summary of the recorded sessions: 20 sessions in the 23 minutes the
    device time allowed (1380 s of run wall when the last one ended)."""
    text = timing.summary(timings, run_wall_s=1380)
    assert "all: 20 session(s) (4 on another session's engine)" in text
    assert "starts 10 cold, 2 warm (compile gate)" in text
    line = text.splitlines()[-1]
    gpu_s = re.search(r"start-ups \+ benchmark runs (\d+) GPU-s / 4", line)
    parts = re.search(r"GPU-s: start-ups (\d+), benchmark runs (\d+), idle or other (\d+) of (\d+)", line)
    assert int(parts[1]) + int(parts[2]) == pytest.approx(int(gpu_s[1]), abs=1)
    assert int(parts[1]) + int(parts[2]) + int(parts[3]) == pytest.approx(int(parts[4]), abs=2)
    assert int(parts[1]) > int(parts[2])          # start-ups, not measurements, are the GPU time


def test_the_stack_level_gate_made_the_box_wait_for_a_mixtral_start(timings, tables):
    """Why the gate has no stack level: the run's first start (week 14's Mixtral, TP 2) held
    it 417 s, its compile 206 s, while every other vLLM start waited; the next Mixtral key
    compiled in 19 s from the kernels it had left."""
    week14 = tables["week14"].drop_duplicates("server_point").set_index("server_point")
    first, second = week14.loc["enable_expert_parallel=false"], week14.loc["enable_expert_parallel=true"]
    assert first["server_startup_s"] > 400 and first["startup_compile_s"] > 200
    assert second["startup_compile_s"] < 20
    waited = [t["gate_wait_s"] for t in timings if t.get("gate_wait_s", 0) > 400]
    assert waited, "no session waited on the stack's first start"
