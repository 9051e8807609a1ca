"""First starts on fresh 2x H200 boxes with the sessions building FlashInfer before their
claims (tests/data/recorded_gpu/h200x2_20261129c_fresh_starts, real): what today's log
reading finds in them, against the TP 2 start of the same day before (h200x2_20261129_tp2)."""
import json
from pathlib import Path

from servelab.engines import server_log
from servelab.engines.vllm import startup_log as vllm_log

DATA = Path(__file__).parents[1] / "data/recorded_gpu"
FRESH = DATA / "h200x2_20261129c_fresh_starts"
SPAWNED = "We must use the `spawn` multiprocessing start method"


def start(box: str, week: str) -> tuple[dict, dict, str]:
    d = FRESH / box / week
    text = (d / "server.log").read_text()
    return vllm_log.timeline(text), json.loads((d / "timing.json").read_text()), text


def test_tp2_names_the_fusion_size_and_its_engine_process_forks():
    before = (DATA / "h200x2_20261129_tp2/sessions/week13/tensor_parallel_size=2-20261129T134857/server.log").read_text()
    assert SPAWNED in before and "Reasons: CUDA is initialized" in before
    for box in ("before_inspect", "final"):
        facts, timing, text = start(box, "week13")
        assert '"fi_allreduce_fusion_max_size_mb":64' in (FRESH / box / "week13/command.txt").read_text()
        assert SPAWNED not in text
        assert facts["startup_frontend_s"] <= 3            # 34 s spawned (its engine process's imports)
        print(f"\n{box}: TP 2 first start {timing['startup_s']:.1f} s (111.5 s before)")


def test_each_session_built_its_flashinfer_before_its_claim_while_its_server_imported():
    for box in ("before_inspect", "final"):
        for week in ("week01", "week13"):
            facts, timing, _ = start(box, week)
            log = (FRESH / box / week / "session.log").read_text()
            assert log.index("servelab prebuild-jit:") < log.index("claimed for this job")
            assert timing["jit_build_s"] > 60                 # a fresh box's build, no GPU held
            assert server_log.jit_spans_s(facts) <= 9          # 80-187 s when a start built them
            assert facts["startup_imports_s"] == 0 and facts["startup_imported_ahead_s"] > 20


def test_the_model_inspected_ahead_leaves_the_api_server_nothing_to_inspect():
    before, _, _ = start("before_inspect", "week01")
    after, timing, text = start("final", "week01")
    assert before["startup_frontend_s"] >= 20 and after["startup_frontend_s"] <= 3
    # the inspection's interpreter ran before the grant: its imports ahead are longer by it
    assert after["startup_imported_ahead_s"] > before["startup_imported_ahead_s"] + 15
    assert text.index("nixl_ep was found") < text.index("servelab: GPU(s) granted at")
    print(f"\n8B TP 1 first start {timing['startup_s']:.1f} s (85.8 s before, goal 60 s)")
    # alone on a fresh 1x H200 box, the kind of the 85.8 s start (imports 18.3 s, front end 21 s)
    alone, timing, _ = start("one_h200", "week01")
    assert alone["startup_imports_s"] == 0 and alone["startup_frontend_s"] <= 3
    assert timing["jit_build_s"] > 60 and timing["compile"] == "cold"
    print(f"8B TP 1 first start alone on a fresh 1x H200 box {timing['startup_s']:.1f} s")
