"""SGLang behind servelab's engine interface: `python -m sglang.launch_server`, its own client
`sglang.bench_serving` run as a subprocess in the engine's environment (through
servelab.engines.sglang.bench, which bounds a point sized in time), its JSONL result in
vLLM's key names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from servelab.engines import commands
from servelab.engines.face import EngineFace
from servelab.engines.sglang import parsers, startup_log


class SGLang(EngineFace):
    llmd_load_tool = "sglang-bench-serving"   # as llm-d names it
    name = "sglang"
    distributions = ("sglang",)
    conda_env = "sglang"   # its session jobs' environment: envs/sglang.yaml
    import_module, install_hint = "sglang", "pip install 'sglang[all]' (a release pinned to your torch)"
    reset_cache_path = "/flush_cache"
    reset_cache_env: dict = {}
    # sglang/srt/managers/*: "Scheduler hit an exception: ...", likewise the detokenizer,
    # tokenizer manager and data-parallel controller; the launcher's "Received sigquit"
    fatal_lines = ("hit an exception", "Received sigquit from a child process")
    engine_processes = {"sglang::scheduler": "SGLang scheduler", "sglang::detokenizer": "SGLang detokenizer",
                        "sglang::data_parallel": "SGLang data-parallel controller"}
    process_roles = {"sglang::scheduler": "engine core", "sglang::detokenizer": "detokenizer",
                     "sglang::data_parallel": "router"}
    timeline_metrics = {"running": "sglang:num_running_reqs", "waiting": "sglang:num_queue_reqs",
                        "kv_usage": "sglang:token_usage", "prompt_tokens": "sglang:prompt_tokens_total",
                        "generation_tokens": "sglang:generation_tokens_total"}
    # /metrics counters a point sums (with --enable-metrics): prompt tokens, and those of
    # them served from its cache (servelab.serve.conditions); what the sidecar keeps over time
    counter_metrics = {"prompt_tokens": "sglang:prompt_tokens_total", "cached_tokens": "sglang:cached_tokens_total"}
    kv_transfer_buckets = None
    sampled_metrics = ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
                       "sglang:cache_hit_rate", "sglang:gen_throughput")
    # its server's facts as structured data: max_total_num_tokens (the KV pool's tokens)
    info_path = "/server_info"

    def startup_facts(self, log_text: str, metrics_text: str, info: dict) -> dict:
        """What its start-up stated (KV pool, weights, KV transport): its log, /metrics, /server_info."""
        return startup_log.facts(log_text, metrics_text, info)

    def serve_command(self, model: str, port: int, knobs: dict, served_name: str) -> list[str]:
        # --enable-metrics: its Prometheus counters (prompt and cached tokens, KV usage),
        # which vLLM exports without asking
        return [sys.executable, "-m", "sglang.launch_server", "--model-path", model,
                "--host", "127.0.0.1", "--port", str(port), "--served-model-name", served_name,
                *commands.to_flags({"enable_metrics": True, **knobs}, false_flags=False)]

    # sglang.bench_serving's `random` takes its token ids from ShareGPT, downloaded from the
    # hub when no --dataset-path is given (an H100 box without the hub: every week 16 point
    # failed with LocalEntryNotFoundError); its `random-ids` draws them from the vocabulary,
    # as vLLM's `random` does
    client_datasets = {"random": "random-ids"}

    def client_args(self, model, served_name, port, dataset_name, *, dataset_path, knobs, out_dir) -> list[str]:
        name = self.client_datasets.get(dataset_name, dataset_name) if not dataset_path else dataset_name
        dataset = ["--dataset-name", name] + (["--dataset-path", dataset_path] if dataset_path else [])
        knobs = shared_prefix_groups(dataset_name, knobs)
        return ["--backend", "sglang", "--host", "127.0.0.1", "--port", str(port),
                "--model", served_name, "--tokenizer", model, *dataset,
                "--output-file", str(Path(out_dir) / "bench.jsonl"),
                *commands.to_flags(knobs, false_flags=False)]

    def client(self, env: dict | None = None, forked_from=None):
        """`python -m sglang.bench_serving` in the engine's environment (its own install)."""
        return SGLangBenchClient(env)

    def read_result(self, out_dir: Path) -> dict:
        """The last line of sglang.bench_serving's JSONL, in vLLM's key names."""
        lines = (Path(out_dir) / "bench.jsonl").read_text().strip().splitlines()
        return sglang_to_vllm_keys(json.loads(lines[-1]))

    def parsers(self):
        return parsers.SGLangParsers()



def shared_prefix_groups(dataset_name: str, knobs: dict) -> dict:
    """sglang.bench_serving's generated-shared-prefix workload sends groups x prompts per
    group (64 x 16 = 1024 by default) and ignores --num-prompts: the groups are cut to
    cover num_prompts (an H100 box got 1024 prompts of 2k tokens for a 16-prompt check)."""
    if dataset_name != "generated-shared-prefix" or "num_prompts" not in knobs or "gsp_num_groups" in knobs:
        return knobs
    per_group = int(knobs.get("gsp_prompts_per_group", 16))
    return {**knobs, "gsp_num_groups": max(1, -(-int(knobs["num_prompts"]) // per_group))}


def sglang_to_vllm_keys(result: dict) -> dict:
    out = dict(result)
    for lat in ("ttft", "tpot", "itl"):
        out[f"p50_{lat}_ms"] = result.get(f"median_{lat}_ms")
    for stat in ("mean", "p90", "p99"):
        out[f"{stat}_e2el_ms"] = result.get(f"{stat}_e2e_latency_ms")
    out["p50_e2el_ms"] = out["median_e2el_ms"] = result.get("median_e2e_latency_ms")
    out["total_token_throughput"] = result.get("total_throughput")
    out.setdefault("failed", result["num_prompts"] - result["completed"] if "num_prompts" in result else None)
    return out


class SGLangBenchClient:
    def __init__(self, env: dict | None = None):
        # Offline: the client opens `--model` (the served name) with AutoTokenizer to check for a
        # chat template; on a box without the hub its retries cost 65-70 s of every point (an
        # H100, SGLang 0.5.17). Everything it needs is local (`--tokenizer`, dataset paths).
        self.env = {**(os.environ if env is None else env), "HF_HUB_OFFLINE": "1"}

    def run(self, argv: list[str], log: Path) -> None:
        with open(log, "a") as out:
            out.write(f"$ python -m servelab.engines.sglang.bench {' '.join(argv)}\n")
            out.flush()
            subprocess.run([sys.executable, "-m", "servelab.engines.sglang.bench", *argv], stdout=out,
                           stderr=subprocess.STDOUT, check=True, env=self.env)
