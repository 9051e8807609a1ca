"""The first of two lent slots of the whole course on a 4x H100 (tests/data/recorded_gpu/
h100x4_20261127e: commit ff3aa88, the README's GPU-check command through
envs/lent-gpu/course-run.sh, vLLM 0.26.0 + lm-eval + LMCache, SGLang 0.5.17), replayed. The
device time ended 23.5 minutes into the run with 27 sessions ended; the pack of its store
(envs/lent-gpu/poll.sh) is what a second slot resumes. What it showed: compile keys with the
shapes in them (week 5: one cold start per key, the other warm; week 8's search: no wait
for another budget's start); a fresh box's cold starts are FlashInfer's JIT builds more
than torch.compile."""
import re
from pathlib import Path

import pytest

from helpers import recorded_run
from servelab.checks.validate import load_configs
from servelab.config.experiments import server_points
from servelab.run import timing
from servelab.run.compile_gate import compile_key

ROOT = Path(__file__).parents[2]
RUN = ROOT / "tests/data/recorded_gpu/h100x4_20261127e"
TIMINGS, TABLES = recorded_run.timings(RUN), recorded_run.tables(RUN)
RUN_WALL_S = 1409   # 15:20:29 (course-run.sh's run-started) to 15:43:58 (the last poll's pack)


@pytest.fixture(scope="module")
def check_config():
    return load_configs([str(ROOT / "config/config.yaml"), str(ROOT / "config/gpu-check.yaml")])


def by_point(experiment: str) -> dict[str, dict]:
    return {t["server_point"]: t for t in TIMINGS if t["experiment"] == experiment}


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
