"""The second lent slot of the whole course on a 4x H100 (tests/data/recorded_gpu/
h100x4_20261127f: commit 2c94346, envs/lent-gpu/course-run.sh with the first slot's pack
as .gpu/resume/course.tgz), replayed. Only its first eight minutes came back: the second
poll's pack outlasted the 600 s call (week 2's profiler traces, since left on the box by
pack-results.sh) and the machine went back with the run before the next call. What those
minutes showed on the GPU: the first slot's 84 points resumed without an engine, and the
TP 4 session claimed the empty box first, then spent 452 s starting, most of it in
FlashInfer's JIT builds while its four GPUs waited."""
import re
from pathlib import Path

from servelab.engines import server_log
from servelab.engines.vllm import startup_log as vllm_log

ROOT = Path(__file__).parents[2]
RUN = ROOT / "tests/data/recorded_gpu/h100x4_20261127f"
LOG = (RUN / "run.log").read_text()


def test_the_tp4_start_on_a_fresh_box_waited_mostly_for_flashinfers_jit():
    """452 s to health on four GPUs (1809 GPU-s): the all-reduce fusion's JIT build 189 s and
    the warm-up after the graphs 114 s, two thirds of it; torch.compile proper about 22 s."""
    healthy = float(re.search(r"server healthy after ([\d.]+)s; measuring 3 point", LOG)[1])
    facts = vllm_log.log_facts((RUN / "logs/week13.tensor_parallel_size=4.server.log").read_text())
    jit = server_log.jit_spans_s(facts)              # what its timing.json counts as startup_jit_s
    assert jit == facts["startup_allreduce_fusion_s"] + facts["startup_warmup_s"]
    assert healthy == 452.2 and round(4 * healthy) == 1809
    assert jit == 303.0 and jit / healthy > 0.65
    assert facts["startup_compile_s"] - facts["startup_allreduce_fusion_s"] < 31   # the rest of torch.compile
    assert "--tensor-parallel-size 4" in (RUN / "logs/week13.tensor_parallel_size=4.command.txt").read_text()
