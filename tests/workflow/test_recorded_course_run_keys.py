"""The second whole-course run on a lent 4x H100 (tests/data/recorded_gpu/h100x4_20261127d:
commit b36aa85, the README's GPU-check command, vLLM 0.26.0 + lm-eval + LMCache, SGLang
0.5.17), replayed. The device time ran out 19 minutes in, 14 sessions ended. What it showed:
a compile key shared by a Mixtral's two servers cut the second's compile tenfold; a key
without the token budget made week 1 wait for nothing; week 13's TP 4 session was never
launched (Snakemake's scheduler fills each freed `gpu` unit with a narrower job)."""
import re
from pathlib import Path

import pytest

from helpers import recorded_run
from servelab.checks.validate import load_configs
from servelab.config.experiments import server_points
from servelab.run import timing
from servelab.run.compile_gate import compile_key

ROOT = Path(__file__).parents[2]
RUN = ROOT / "tests/data/recorded_gpu/h100x4_20261127d"
TIMINGS, TABLES = recorded_run.timings(RUN), recorded_run.tables(RUN)
RUN_WALL_S = 1155   # 12:09:18 (Snakemake's start) to 12:28:33 (the last line before the device time ran out)


@pytest.fixture(scope="module")
def check_config():
    return load_configs([str(ROOT / "config/config.yaml"), str(ROOT / "config/gpu-check.yaml")])


def knobs(config: dict, experiment: str, point: str) -> dict:
    return server_points(config["experiments"][experiment])[point]


def test_a_mixtrals_two_servers_share_a_key_and_the_second_compiled_a_tenth(check_config):
    """Expert parallelism is no compiled shape: one key. The first start compiled 267 s (417 s
    to health); the second waited for it at the gate, holding no GPU, imported its engine
    meanwhile, and compiled 27 s (120 s to health)."""
    ep = {v: knobs(check_config, "week14", f"enable_expert_parallel={v}") for v in ("false", "true")}
    assert compile_key("vllm", "mixtral_8x7b", ep["false"]) == compile_key("vllm", "mixtral_8x7b", ep["true"])
    week14 = TABLES["week14"].drop_duplicates("server_point").set_index("server_point")
    first, second = week14.loc["enable_expert_parallel=true"], week14.loc["enable_expert_parallel=false"]
    assert first["startup_compile_s"] > 250 and first["server_startup_s"] > 400
    assert second["startup_compile_s"] < first["startup_compile_s"] / 5
    assert second["server_startup_s"] < first["server_startup_s"] / 3
    assert second["startup_imported_ahead_s"] > 20            # pre-started while it waited
    gated = {t["server_point"]: t for t in TIMINGS if t["experiment"] == "week14"}
    assert gated["enable_expert_parallel=true"]["compile"] == "cold"
    assert gated["enable_expert_parallel=false"]["compile"] == "warm"
    assert gated["enable_expert_parallel=false"]["gate_wait_s"] > 400


def test_a_token_budget_is_a_compiled_shape(check_config):
    """At b36aa85 the key was engine, model and layout alone: week 1's server waited 131 s at
    the gate for week 8's search point (chunk budget 1024), then compiled 22 s anyway, as
    long as a cold start. The budget is in the key now."""
    week01 = next(t for t in TIMINGS if t["experiment"] == "week01")
    assert week01["compile"] == "warm" and week01["gate_wait_s"] > 100
    assert TABLES["week01"]["startup_compile_s"].iloc[0] > 17
    search = check_config["experiments"]["week08_search"]
    budget = {**search["server"]["args"], "max_num_batched_tokens": 1024}
    assert compile_key("vllm", "llama31_8b", knobs(check_config, "week01", "base")) != \
        compile_key("vllm", "llama31_8b", budget)


def test_where_the_gpu_seconds_of_the_ended_sessions_went():
    text = timing.summary(TIMINGS, run_wall_s=RUN_WALL_S)
    assert "all: 14 session(s) (2 on another session's engine)" in text
    assert "starts 4 cold, 4 warm (compile gate)" in text
    parts = re.search(r"GPU-s: start-ups (\d+), benchmark runs (\d+), idle or other (\d+) of (\d+)",
                      text.splitlines()[-1])
    startups, bench = int(parts[1]), int(parts[2])
    assert startups > 1.5 * bench      # a fresh box: start-ups, not measurements, are the GPU time
