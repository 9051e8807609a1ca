"""Week 3's theory: how long a batch should take if only weight traffic or only
arithmetic limited it (the roofline), from the model's size and the GPU's datasheet.

Each decode step reads every weight a token uses once (memory time W / BW: all but the
input embedding table and a MoE's experts the token is not sent to, `active_fraction` of
servelab.fetch.model_facts) and does about 2 x those params FLOPs per sequence (compute
time 2 P B / F); the step takes the larger.
The prefill of the batch does the same with B x input_len tokens. KV-cache
traffic and attention FLOPs are left out, so this is a lower bound.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from servelab.fetch.model_facts import BYTES_PER_PARAM

SPECS = Path(__file__).resolve().parents[2] / "resources" / "gpus.yaml"


def gpu_spec(name: str | None, specs_file: Path = SPECS) -> dict | None:
    if not name:
        return None
    for spec in yaml.safe_load(Path(specs_file).read_text()):
        if spec["match"] in name:
            return spec
    return None


def step_time_s(weight_bytes: float, params: float, tokens: int, spec: dict) -> float:
    memory = weight_bytes / (spec["hbm_gbps"] * 1e9)
    compute = 2 * params * tokens / (spec["tflops"] * 1e12)
    return max(memory, compute)


def batch_latency_s(weight_bytes: float, dtype: str | None, batch: int, input_len: int, *, output_len: int,
                    spec: dict) -> float:
    """Lower bound of `vllm bench latency`'s time for one batch: prefill + decode steps."""
    params = weight_bytes / BYTES_PER_PARAM.get(dtype or "bfloat16", 2)
    prefill = step_time_s(weight_bytes, params, batch * input_len, spec)
    return prefill + (output_len - 1) * step_time_s(weight_bytes, params, batch, spec)


def theory_columns(row: dict, model: dict | None, gpu_names: list[str]) -> dict:
    """`theory_latency_s` and `theory_decode_step_ms` for an offline latency row,
    when the GPU is in resources/gpus.yaml; None otherwise (CPU, unknown GPU)."""
    spec = gpu_spec(gpu_names[0] if gpu_names else None)
    needed = ("batch_size", "input_len", "output_len")
    if not spec or not model or not model.get("weight_bytes") or any(row.get(k) is None for k in needed):
        return {"theory_latency_s": None, "theory_decode_step_ms": None}
    read = model["weight_bytes"] * model.get("active_fraction", 1.0)   # what one token's step reads
    params = read / BYTES_PER_PARAM.get(model.get("dtype") or "bfloat16", 2)
    return {
        "theory_latency_s": batch_latency_s(read, model.get("dtype"), int(row["batch_size"]),
                                            int(row["input_len"]), output_len=int(row["output_len"]), spec=spec),
        "theory_decode_step_ms": 1e3 * step_time_s(read, params, int(row["batch_size"]), spec),
    }


def floors_ms(model: dict | None, gpu_names: list[str], gpus_used: int, input_tokens: float | None) -> dict:
    """The hardware's floor for a served point, in ms: `itl_floor_ms` (one decode step
    reads every weight a token uses once, whatever the batch: a MoE's `active_fraction`)
    and `ttft_floor_ms` (one request's prefill alone: its weight read or its arithmetic).
    None where the GPU has no datasheet entry (a CPU, an unknown GPU) or the model's size
    is unknown."""
    spec = gpu_spec(gpu_names[0] if gpu_names else None)
    if not spec or not model or not model.get("weight_bytes"):
        return {"itl_floor_ms": None, "ttft_floor_ms": None}
    # tensor parallelism spreads the weights over the point's GPUs: each reads its share
    weights = model["weight_bytes"] * model.get("active_fraction", 1.0) / max(gpus_used, 1)
    params = weights / BYTES_PER_PARAM.get(model.get("dtype") or "bfloat16", 2)
    return {"itl_floor_ms": 1e3 * step_time_s(weights, params, 1, spec),
            "ttft_floor_ms": 1e3 * step_time_s(weights, params, max(int(input_tokens or 1), 1), spec)}
