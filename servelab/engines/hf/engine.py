"""HF transformers behind servelab's engine interface: offline only, static batches of
`generate` (servelab.engines.hf.static_batching, its own runner)."""

from __future__ import annotations

import sys

from servelab.engines import commands
from servelab.engines.face import EngineFace


class Transformers(EngineFace):
    """HF transformers `generate` in static batches (servelab.engines.hf.static_batching): offline only."""
    name = "transformers"
    llmd_offline_tools = {"static_batch": "servelab-hf-static-batch"}   # llm-d has no name for it
    distributions = ("transformers",)
    conda_env = "vllm"   # vLLM's environment holds its torch and transformers
    import_module, install_hint = "transformers", "pip install transformers"
    reset_cache_path = None
    reset_cache_env: dict = {}
    fatal_lines: tuple = ()
    engine_processes: tuple = ()
    process_roles: dict = {}
    timeline_metrics: dict = {}
    counter_metrics: dict = {}
    kv_transfer_buckets = None
    sampled_metrics: tuple = ()
    info_path = None

    def startup_facts(self, log_text: str, metrics_text: str, info: dict) -> dict:
        """Its runner states nothing at start-up that a point's record keeps."""
        return {}

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
