"""The HF transformers static-batching baseline (weeks 4, 7), run for real on the tiny model."""
import json
import subprocess
import sys

import pytest

from servelab.engines import offline_plan

from servelab.engines.hf import static_batching as hf_static
from servelab.analysis.metrics import offline_row


def test_random_lengths_stay_in_their_range_and_follow_the_seed():
    reqs = hf_static.random_requests(200, 40, 20, 0.5, vocab=10240, seed=3)
    assert all(20 <= len(p) <= 60 and 10 <= n <= 30 for p, n in reqs)
    assert len({n for _, n in reqs}) > 5
    assert reqs == hf_static.random_requests(200, 40, 20, 0.5, vocab=10240, seed=3)
    assert {n for _, n in hf_static.random_requests(10, 40, 20, 0.0, vocab=10240, seed=0)} == {20}
    with pytest.raises(ValueError, match="random-range-ratio"):
        hf_static.random_requests(1, 4, 4, 1.5, vocab=10240, seed=0)


def point_args(model_dir, out, ratio):
    return ["--model", str(model_dir), "--dataset-name", "random", "--num-prompts", "12", "--batch-size", "4",
            "--random-input-len", "16", "--random-output-len", "12",
            "--random-range-ratio", str(ratio), "--dtype", "float32", "--output-json", str(out)]


def test_static_batches_idle_on_uneven_outputs(tiny_model, tmp_path):
    """One point standalone; the same point and another as one plan, the model loaded once."""
    run = [sys.executable, "-m", "servelab.engines.hf.static_batching"]
    subprocess.run([*run, *point_args(tiny_model, tmp_path / "alone.json", 0.0)],
                   check=True, capture_output=True, text=True, timeout=300)
    offline_plan.write_plan(tmp_path / "plan.json", [(f"r{r}", point_args(tiny_model, tmp_path / f"r{r}.json", r))
                                                     for r in (0.0, 0.9)])
    subprocess.run([*run, "plan", str(tmp_path / "plan.json"), str(tmp_path / "status.jsonl")],
                   check=True, capture_output=True, text=True, timeout=300)
    status = offline_plan.read_status(tmp_path / "status.jsonl")
    assert [s["key"] for s in status] == ["r0.0", "r0.9"] and not any("error" in s for s in status)
    assert status[0]["engine_start_s"] > 0 and status[1]["engine_start_s"] == 0   # one model load
    alone, even, uneven = (json.loads((tmp_path / f).read_text()) for f in ("alone.json", "r0.0.json", "r0.9.json"))
    # the plan's point is the standalone point: same requests, same batches
    for key in ("num_requests", "total_num_tokens", "total_output_tokens", "padding_fraction"):
        assert even[key] == alone[key], key
    assert even["num_requests"] == uneven["num_requests"] == 12
    # equal lengths: every decode slot is used; spread lengths: short requests wait for the longest
    assert even["padding_fraction"] == 0
    assert uneven["padding_fraction"] > 0.1
    assert even["total_output_tokens"] == 12 * 12
    row = offline_row(uneven)
    assert row["completed"] == 12 and row["output_throughput_tps"] > 0
    assert row["total_token_throughput_tps"] > row["output_throughput_tps"]


def test_sharegpt_needs_a_file():
    with pytest.raises(SystemExit, match="needs --dataset-path"):
        hf_static.main(["--model", "x", "--dataset-name", "sharegpt", "--num-prompts", "1",
                        "--output-json", "o.json"])
