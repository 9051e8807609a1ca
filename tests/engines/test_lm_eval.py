"""lm-eval against a server (week 12): command, results, the local GSM8K-format task."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

from servelab.fetch import eval_task
from servelab.engines.clients import lm_eval as lm_eval_client
from servelab.analysis import metrics

SPEC = {"tasks": ["gsm8k"], "args": {"num_fewshot": 5, "limit": 10},
        "model_args": {"num_concurrent": 8, "max_length": 4096}}


def test_command_points_local_completions_at_the_server():
    cmd = lm_eval_client.command(SPEC, "servelab-week12", 8123, "/m/tok", out_dir="/out", include_path=None)
    assert cmd[1:6] == ["-m", "lm_eval", "run", "--model", "local-completions"]
    model_args = cmd[cmd.index("--model_args") + 1]
    assert "base_url=http://127.0.0.1:8123/v1/completions" in model_args
    assert "model=servelab-week12" in model_args and "tokenizer=/m/tok" in model_args
    assert model_args.endswith("num_concurrent=8,max_length=4096")
    # lm-eval spells its options in snake_case
    assert cmd[cmd.index("--num_fewshot") + 1] == "5" and "--include_path" not in cmd
    assert lm_eval_client.command(SPEC, "s", 1, "t", out_dir="o", include_path="/tasks")[-2:] == ["--include_path", "/tasks"]


def results(strict, flexible):
    return {"results": {"gsm8k": {"alias": "gsm8k", "sample_len": 10, "exact_match,strict-match": strict,
                                  "exact_match_stderr,strict-match": 0.1,
                                  "exact_match,flexible-extract": flexible}},
            "n-samples": {"gsm8k": {"original": 1319, "effective": 10}}}


def test_accuracy_columns_join_every_row_of_their_server_point(tmp_path):
    cols = lm_eval_client.accuracy_columns(results(0.5, 0.7))
    assert cols == {"gsm8k_exact_match_strict_match": 0.5, "gsm8k_exact_match_strict_match_stderr": 0.1,
                    "gsm8k_exact_match_flexible_extract": 0.7, "gsm8k_samples": 10}
    store = tmp_path / "store"
    bench = json.loads((Path(__file__).parents[1] / "data/vllm_bench_serve_rate4.json").read_text())
    views = []
    for point, acc in (("fp16", 0.8), ("awq", 0.6)):
        recs = []
        for key, knobs, result in ((f"{point}-b", {"num_prompts": 200}, bench),
                                   (f"{point}-e", {"lm_eval": SPEC}, results(acc, acc))):
            (store / key).mkdir(parents=True)
            (store / key / "bench.json").write_text(json.dumps(result))
            recs.append({"key": key, "experiment": "week12", "server_point": point, "client_knobs": knobs,
                         "identity": {"model": point, "server": {}, "hardware": {"gpus": ["H100"]}}})
        views.append(tmp_path / f"{point}.json")
        views[-1].write_text(json.dumps(recs))
    table = metrics.table(views, store)
    assert len(table) == 2  # the eval is no row of its own
    assert table.set_index("server_point")["gsm8k_exact_match_strict_match"].to_dict() == {"fp16": 0.8, "awq": 0.6}
    assert pd.notna(table["output_throughput_tps"]).all()


def test_generated_task_is_found_and_scored_by_lm_eval(tmp_path):
    """lm-eval's own CLI runs the generated task (its `dummy` model answers nonsense: 0 correct)."""
    task = eval_task.write_task(tmp_path / "tasks", "gsm8k_arith", "gsm8k", questions=4, fewshot_pool=3, seed=1)
    rows = [json.loads(line) for line in (tmp_path / "tasks/test.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all("\n#### " in r["answer"] for r in rows)
    total = int(rows[0]["answer"].rsplit("#### ", 1)[1])
    have, more, gave = (int(n) for n in re.findall(r"\d+", rows[0]["question"]))
    assert total == have + more - gave
    assert "include:" in task.read_text()
    proc = subprocess.run([sys.executable, "-m", "lm_eval", "run", "--model", "dummy", "--tasks", "gsm8k_arith",
                           "--include_path", str(tmp_path / "tasks"), "--num_fewshot", "2",
                           "--output_path", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = lm_eval_client.newest_results(tmp_path / "out")
    assert out["n-samples"]["gsm8k_arith"]["effective"] == 4
    assert lm_eval_client.accuracy_columns(out)["gsm8k_arith_exact_match_strict_match"] == 0
