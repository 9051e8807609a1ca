"""The third lent slot of the whole course on a 4x H100 (tests/data/recorded_gpu/
h100x4_20261128g: commit d02aee1, envs/lent-gpu/course-run.sh with the first slot's pack as
.gpu/resume/course.tgz, and FlashInfer's JIT modules built by envs/lent-gpu/jit-prebuild.sh
while the staging went on), replayed. Its last pack came back 15 minutes into the run (the
machine went back before the next poll). What it showed: with the JIT modules built before
any GPU was claimed, the TP 4 start took 184 s where the second slot's took 452 s, and no
vLLM start waited for a JIT build; with the first slot's points, 22 of the course's 29
experiments have their tables, every row valid."""
import re
from pathlib import Path


from helpers import recorded_run
from servelab.run import timing
from servelab.engines.vllm import startup_log as vllm_log

ROOT = Path(__file__).parents[2]
RUN = ROOT / "tests/data/recorded_gpu/h100x4_20261128g"
SLOT2 = ROOT / "tests/data/recorded_gpu/h100x4_20261127f"
TIMINGS, TABLES = recorded_run.timings(RUN), recorded_run.tables(RUN)
RUN_WALL_S = 893   # 03:25:17 (Snakemake's start) to 03:40:10 (the last returned poll's pack)
TP4 = "logs/week13.tensor_parallel_size=4.server.log"


def tp4_facts(run: Path) -> dict:
    return vllm_log.log_facts((run / TP4).read_text())


def test_the_tp4_start_found_the_all_reduce_fusion_and_the_sampler_built():
    """Slot 2, a fresh box without the prebuild: 452 s to health, 189 s of it building the
    all-reduce fusion and 114 s of warm-up building the sampler. Here both were built."""
    before, now = tp4_facts(SLOT2), tp4_facts(RUN)
    assert before["startup_allreduce_fusion_s"] > 150 and before["startup_warmup_s"] > 100
    assert now["startup_allreduce_fusion_s"] <= 5 and now["startup_warmup_s"] <= 10
    tp4 = next(t for t in TIMINGS if t["server_point"] == "tensor_parallel_size=4")
    assert tp4["gpus"] == ["0", "1", "2", "3"] and tp4["startup_s"] < 190
    assert tp4["startup_jit_s"] == now["startup_allreduce_fusion_s"] + now["startup_warmup_s"]
    # what is left of the 184 s: the imports and the front end (77 s), the engine's own init
    assert now["startup_imports_s"] + now["startup_frontend_s"] > 70


def test_the_run_line_of_the_ended_sessions():
    """23 sessions ended in 893 s. Start-ups are still most of the GPU time (the SGLang and
    LMCache starts, the TP 4), but FlashInfer's builds are 76 GPU-s of them (slot 2's TP 4
    alone: 4 x 303)."""
    line = timing.run_line(TIMINGS, RUN_WALL_S)
    assert "on 4 GPU(s) (0,1,2,3)" in line and len(TIMINGS) == 23
    gpu_s = float(re.search(r"benchmark runs (\d+) GPU-s / 4", line)[1])
    jit = float(re.search(r"waiting for FlashInfer JIT builds (\d+)", line)[1])
    assert round(RUN_WALL_S / (gpu_s / 4), 3) == 1.117
    assert jit < 100
