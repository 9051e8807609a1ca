"""The HF transformers static-batching baseline (weeks 4, 7), run for real on the tiny model."""
import json
import subprocess
import sys

import pytest

from servelab.engines import hf_static
from servelab.fetch import tiny_model
from servelab.analysis.metrics import offline_row


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from conftest import load_config

    recipe = load_config("config/local.yaml")["models"]["tiny_llama"]["tiny"]
    return tiny_model.build(tmp_path_factory.mktemp("m") / "tiny", recipe)


def test_random_lengths_stay_in_their_range_and_follow_the_seed():
    reqs = hf_static.random_requests(200, 40, 20, 0.5, vocab=10240, seed=3)
    assert all(20 <= len(p) <= 60 and 10 <= n <= 30 for p, n in reqs)
    assert len({n for _, n in reqs}) > 5
    assert reqs == hf_static.random_requests(200, 40, 20, 0.5, vocab=10240, seed=3)
    assert {n for _, n in hf_static.random_requests(10, 40, 20, 0.0, 10240, 0)} == {20}
    with pytest.raises(ValueError, match="random-range-ratio"):
        hf_static.random_requests(1, 4, 4, 1.5, 10240, 0)


def run(model_dir, tmp_path, ratio):
    out = tmp_path / f"static-{ratio}.json"
    subprocess.run([sys.executable, "-m", "servelab.engines.hf_static", "--model", str(model_dir),
                    "--dataset-name", "random", "--num-prompts", "12", "--batch-size", "4",
                    "--random-input-len", "16", "--random-output-len", "12",
                    "--random-range-ratio", str(ratio), "--dtype", "float32", "--output-json", str(out)],
                   check=True, capture_output=True, text=True, timeout=300)
    return json.loads(out.read_text())


def test_static_batches_idle_on_uneven_outputs(model_dir, tmp_path):
    even, uneven = run(model_dir, tmp_path, 0.0), run(model_dir, tmp_path, 0.9)
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
