"""The GPU check's first starts on a fresh 2x H200 box after the DAG's JIT prebuild
(tests/data/recorded_gpu/h200x2_20261128_jit, real): today's log reading finds no start
that held its GPUs while FlashInfer built (80-187 s of them on fresh boxes before), and
the sessions' recorded figures agree with it."""
import json
from pathlib import Path

import pytest

from servelab.engines import server_log
from servelab.engines.vllm import startup_log as vllm_log

RECORDING = Path(__file__).parents[1] / "data/recorded_gpu/h200x2_20261128_jit"
LOGS = sorted(RECORDING.glob("sessions/*/*/server.log"))


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.parent.parent.name)
def test_a_fresh_box_s_first_start_waits_seconds_not_minutes_on_flashinfer(log):
    facts = vllm_log.timeline(log.read_text())
    timing = json.loads((log.parent / "timing.json").read_text())
    jit = server_log.jit_spans_s(facts)
    print(f"\n{log.parent.parent.name}: start-up {timing['startup_s']:.1f} s, JIT spans {jit:.0f} s, "
          f"{len(timing['gpus'])} GPU(s), compile {timing.get('compile')}")
    assert "startup_warmup_s" in facts                      # the span was found in the log
    assert jit <= 5, facts                                  # the sampler's warm-up: 99-114 s cold
    assert abs(jit - timing.get("startup_jit_s", 0.0)) <= 1.0   # what the session recorded then
    if len(timing["gpus"]) > 1:                             # TP 2: the all-reduce fusion span too
        assert facts["startup_allreduce_fusion_s"] <= 2      # 187-203 s cold



TP2 = Path(__file__).parents[1] / "data/recorded_gpu/h200x2_20261129_tp2"


def test_tp2s_first_start_on_a_fresh_box_builds_nothing_and_says_where_its_111_s_went():
    """A second fresh 2x H200 box, a day later: the prebuild ran before the session claimed
    its GPUs, the start built no all-reduce fusion and spent 7 s (not 99-114 s) in the
    sampler's first run; the 90 s goal is missed by imports, front end and a cold compile."""
    (log,) = TP2.glob("sessions/week13/*/server.log")
    facts = vllm_log.timeline(log.read_text())
    timing = json.loads((log.parent / "timing.json").read_text())
    assert facts["startup_allreduce_fusion_s"] == 0.0 and server_log.jit_spans_s(facts) <= 10
    assert timing["startup_jit_s"] == server_log.jit_spans_s(facts) and timing["compile"] == "cold"
    named = facts["startup_imports_s"] + facts["startup_frontend_s"]
    assert named < timing["startup_s"] and timing["startup_s"] > 90   # the goal, missed
    assert "torch.compile took 18.34 s in total" in log.read_text()
    for build in ("sampling", "trtllm_comm"):
        assert "built:" in (TP2 / "prebuild_jit" / f"{build}.log").read_text()
