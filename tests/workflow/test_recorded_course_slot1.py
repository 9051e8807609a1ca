"""The first of two lent slots of the whole course on a 4x H100 (tests/data/recorded_gpu/
h100x4_20261127e: commit ff3aa88, the README's GPU-check command through
envs/lent-gpu/course-run.sh, vLLM 0.26.0 + lm-eval + LMCache, SGLang 0.5.17), replayed. The
device time ended 23.5 minutes into the run with 27 sessions ended; the pack of its store
(envs/lent-gpu/poll.sh) is what a second slot resumes. What it showed: compile keys with the
shapes in them (week 5: one cold start per key, the other warm; week 8's search: no wait
for another budget's start); a fresh box's cold starts are FlashInfer's JIT builds more
than torch.compile."""
import re
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest

from helpers import recorded_run
from servelab.checks.validate import load_configs
from servelab.config.experiments import server_points
from servelab.run import timing
from servelab.run.compile_gate import compile_key

ROOT = Path(__file__).parents[2]
RUN = ROOT / "tests/data/recorded_gpu/h100x4_20261127e"
LOG = (RUN / "run.log").read_text()
TIMINGS, TABLES = recorded_run.timings(RUN), recorded_run.tables(RUN)
RUN_WALL_S = 1409   # 15:20:29 (course-run.sh's run-started) to 15:43:58 (the last poll's pack)


@pytest.fixture(scope="module")
def check_config():
    return load_configs([str(ROOT / "config/config.yaml"), str(ROOT / "config/gpu-check.yaml")])


def by_point(experiment: str) -> dict[str, dict]:
    return {t["server_point"]: t for t in TIMINGS if t["experiment"] == experiment}


def log_times(name: str, *patterns: str) -> list[datetime]:
    """When each pattern first appears in a shipped server log (vLLM's `MM-DD HH:MM:SS`)."""
    text = (RUN / "logs" / name).read_text()
    found = []
    for pattern in patterns:
        line = next(line for line in text.splitlines() if re.search(pattern, line))
        found.append(datetime.strptime(re.search(r"\d\d-\d\d \d\d:\d\d:\d\d", line).group(), "%m-%d %H:%M:%S"))
    return found


def test_the_slot_ran_the_whole_course_list_and_every_ended_row_is_valid():
    assert "servelab run-what-fits: on 4 GPU(s) (NVIDIA H100 80GB HBM3): runs 29 experiment(s), " \
           "66 server point(s); leaves out 1:" in LOG
    rows = pd.concat(TABLES.values())
    assert len(TABLES) == 13 and len(rows) == 64 and rows["valid"].all()
    assert {"0.26.0", "0.5.17"} <= set(rows["engine_version"].astype(str))   # vLLM and SGLang
    assert len(TIMINGS) == 27


def test_the_run_line_of_the_ended_sessions():
    """Start-ups, not measurements, are most of the GPU time on a fresh box (58 %)."""
    line = timing.run_line(TIMINGS, RUN_WALL_S)
    assert "on 4 GPU(s) (0,1,2,3)" in line
    gpu_s = float(re.search(r"benchmark runs (\d+) GPU-s / 4", line).group(1))
    startups = float(re.search(r"GPU-s: start-ups (\d+)", line).group(1))
    assert round(RUN_WALL_S / (gpu_s / 4), 2) == 1.18
    assert startups / gpu_s > 0.55


def test_week5_compiles_once_per_kv_cache_dtype(check_config):
    """Prefix caching is no compiled shape, the KV-cache dtype is: two keys, and in each one
    start compiled cold and the other started warm, in about half the time."""
    points = server_points(check_config["experiments"]["week05"])
    keys = {p: compile_key("vllm", "llama31_8b", knobs) for p, knobs in points.items()}
    assert len(set(keys.values())) == 2
    starts = by_point("week05")
    table = TABLES["week05"].drop_duplicates("server_point").set_index("server_point")
    for key in set(keys.values()):
        pair = [p for p, k in keys.items() if k == key]
        cold = next(p for p in pair if starts[p]["compile"] == "cold")
        warm = next(p for p in pair if starts[p]["compile"] == "warm")
        assert starts[warm]["gate_wait_s"] > 0                       # it waited for the cold one
        assert table.loc[warm, "startup_compile_s"] < table.loc[cold, "startup_compile_s"] / 3
        assert table.loc[warm, "server_startup_s"] < table.loc[cold, "server_startup_s"] * 2 / 3


def test_week8s_search_budgets_are_keys_of_their_own_and_none_waited(check_config):
    """In the run before (h100x4_20261127d) week 1 waited 131 s at the gate for week 8's
    budget-1024 start and then compiled anyway; with the budget in the key no start waits
    for another budget's."""
    starts = by_point("week08_search")
    assert len(starts) == 3
    assert all(t["compile"] == "cold" and t["gate_wait_s"] == 0 for t in starts.values())
    budgets = {p: {"max_num_batched_tokens": int(p.split("=")[1])} for p in starts}
    base = server_points(check_config["experiments"]["week01"])["base"]
    assert len({compile_key("vllm", "llama31_8b", {**base, **b}) for b in budgets.values()}) == 3
    assert by_point("week01")["base"]["gate_wait_s"] == 0


def test_the_mixtrals_cold_compile_was_flashinfers_allreduce_jit_build():
    """vLLM's "torch.compile took 228.65 s" of the first Mixtral start held a 203 s JIT build of
    FlashInfer's all-reduce fusion (TP 2); the second start found it in the cache (0 s)."""
    cold = log_times("week14.enable_expert_parallel=true.server.log",
                     "Using flashinfer allreduce backend", "Initialized FlashInfer Allreduce norm fusion")
    warm = log_times("week14.enable_expert_parallel=false.server.log",
                     "Using flashinfer allreduce backend", "Initialized FlashInfer Allreduce norm fusion")
    jit_cold, jit_warm = (cold[1] - cold[0]).seconds, (warm[1] - warm[0]).seconds
    assert jit_cold > 180 and jit_warm < 2
    table = TABLES["week14"].drop_duplicates("server_point").set_index("server_point")
    assert table.loc["enable_expert_parallel=true", "startup_compile_s"] - jit_cold < 30


def test_the_quantized_first_starts_waited_for_one_thing_together():
    """Week 12's FP8 and AWQ servers (GPUs 2 and 3, keys of their own) sat 98 s and 117 s
    after sizing their KV caches and went on in the same second: a shared wait on a fresh
    box, no GPU work (a cache-locked JIT build), 209 s start-ups against 27-48 s for bf16."""
    ends, gaps = [], []
    for model in ("fp8", "awq"):
        sized, going = log_times(f"week12.model=llama31_8b_{model}.server.log",
                                 r"gpu_worker.py:857\]", "Kernel JIT monitor activated")
        gaps.append((going - sized).seconds)
        ends.append(going)
    assert min(gaps) > 90 and ends[0] == ends[1]
    assert all(by_point("week12")[f"model=llama31_8b_{m}"]["startup_s"] > 200 for m in ("fp8", "awq"))
