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

from servelab.serve import server_log

ROOT = Path(__file__).parents[2]
RUN = ROOT / "tests/data/recorded_gpu/h100x4_20261127f"
LOG = (RUN / "run.log").read_text()
SESSION = re.compile(r"^\[servelab (\d\d:\d\d:\d\d)\] (\w+/\S+): (?:.* (\d+) already measured, (\d+) to measure"
                     r"|load search .*, (\d+) already measured, done)", re.MULTILINE)


def sessions() -> dict[str, int]:
    """Each session's points left to measure, as it said when it began."""
    return {m[2]: int(m[4]) if m[4] is not None else 0 for m in SESSION.finditer(LOG)}


def started(session: str) -> bool:
    return f"] {session}: 1 process(es) starting" in LOG or f"] {session}: 2 process(es) starting" in LOG


def test_the_first_slots_points_resume_without_an_engine():
    assert "servelab run-what-fits: on 4 GPU(s) (NVIDIA H100 80GB HBM3): runs 29 experiment(s), " \
           "66 server point(s); leaves out 1:" in LOG
    left = sessions()
    done = [s for s, n in left.items() if n == 0]
    assert len(done) == 22                                   # ended in the first slot
    assert not [s for s in done if started(s)]               # no engine for what the store holds
    # cut off mid-session in the first slot: only the missing point is measured again
    assert left["week11/speculative_config=none"] == 1
    # never started in the first slot: every point
    assert left["week13/tensor_parallel_size=4"] == 3 and left["week13/tensor_parallel_size=1"] == 3


def test_the_widest_session_claims_the_empty_box_first():
    """The sessions wait for every model of the run, then start together; the TP 1 jobs
    finding all four GPUs free wait out the start grace, so the TP 4 claims them (the first
    slot's run never started it in 23.5 minutes)."""
    claims = re.findall(r"^\[servelab (\S+)\] GPU\(s\) (\S+) of 0,1,2,3 claimed for this job", LOG, re.MULTILINE)
    assert claims[0] == ("18:46:09", "0,1,2,3")
    first_start = re.search(r"^\[servelab \S+\] (\S+): \d process\(es\) starting", LOG, re.MULTILINE)[1]
    assert first_start == "week13/tensor_parallel_size=4"
    # the narrower sessions launched beside it waited, holding no GPU, until it was done
    assert "still waiting: holding none of the 1 GPU(s) it needs" in LOG
    assert len(claims) == 1


def test_the_tp4_start_on_a_fresh_box_waited_mostly_for_flashinfers_jit():
    """452 s to health on four GPUs (1809 GPU-s): the all-reduce fusion's JIT build 189 s and
    the warm-up after the graphs 114 s, two thirds of it; torch.compile proper about 22 s."""
    healthy = float(re.search(r"server healthy after ([\d.]+)s; measuring 3 point", LOG)[1])
    facts = server_log.facts((RUN / "logs/week13.tensor_parallel_size=4.server.log").read_text())
    jit = server_log.jit_spans_s(facts)              # what its timing.json counts as startup_jit_s
    assert jit == facts["startup_allreduce_fusion_s"] + facts["startup_warmup_s"]
    assert healthy == 452.2 and round(4 * healthy) == 1809
    assert jit == 303.0 and jit / healthy > 0.65
    assert facts["startup_compile_s"] - facts["startup_allreduce_fusion_s"] < 31   # the rest of torch.compile
    assert "--tensor-parallel-size 4" in (RUN / "logs/week13.tensor_parallel_size=4.command.txt").read_text()
