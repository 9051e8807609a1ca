"""Capacity plan of one server point, before any start: the weights each GPU holds, the
KV cache's bytes per token, how many tokens (and max_model_len sequences) its memory
fraction leaves for the KV cache, and whether the engine can start at all.

The arithmetic is the engines' own budget, each engine's memory rule declared with its facts
(servelab.config.engine_facts: `memory_share`, its constants from the recorded GPU runs,
docs/capacity-plan.md, where the plan's error is stated): what its memory knob budgets, less
the weights on that GPU (and, where the budget holds them, the activations' peak); the rest
is KV cache, refused at start-up when nothing is left or less than one max_model_len sequence
fits. On the CPU: the KV cache's GiB that the engine's env gives (its fact `cpu_kv_cache`)
beside the weights in host memory.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from servelab.config.experiments import engine_flags, point_model
from servelab.config import engine_facts as facts
from servelab.fetch.model_facts import decoder_params, routed_experts
from servelab.machine import host_memory_gib, visible_gpus

GIB = 2 ** 30
CPU_KV_GIB = 4   # the KV cache on the CPU where the engine's env sizes none
GPU_SPECS = Path(__file__).resolve().parents[2] / "resources" / "gpus.yaml"
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4, "auto": None}
# the plan's own error in KV tokens against what the engines reported: -0.9 to +4.0 % on
# the recorded H100 and H200 tables (docs/capacity-plan.md). A point short of one
# max_model_len sequence by less than this is warned, not refused: the engine may hold it.
PLAN_ERROR = 0.05


@dataclass
class PointPlan:
    memory: str                 # what the memory is: "NVIDIA H100 80GB HBM3 (79.6 GiB)", "host memory (23.5 GiB)"
    gpus: int                   # GPUs of one replica (tensor x pipeline parallel); 0 on the CPU
    weights_gib: float          # per GPU (the host's on the CPU)
    kv_bytes_per_token: int     # per GPU, every layer it holds
    kv_cache_gib: float
    kv_cache_tokens: int        # one replica's
    max_model_len: int
    sequences: int              # max_model_len sequences the KV cache holds at once
    fits: bool
    why: str | None = None      # what does not fit, with the numbers
    held_gib: float = 0.0       # GPU memory the server holds once up, per GPU (0 on the CPU)
    start_gib: float = 0.0      # free memory vLLM asks to find at its start (its share), per GPU
    warning: str | None = None  # short of fitting, but inside the plan's own error

    def as_dict(self) -> dict:
        return asdict(self)


def gpu_memory_mib(name: str, specs_file: Path = GPU_SPECS) -> int | None:
    """memory.total of a GPU by the name nvidia-smi gives it (resources/gpus.yaml)."""
    for spec in yaml.safe_load(specs_file.read_text()):
        if spec["match"].lower() in name.lower() and spec.get("memory_mib"):
            return int(spec["memory_mib"])
    return None


def tiny_config(recipe: dict) -> dict:
    """The embedded default's tiny Llama recipe (servelab.fetch.tiny_model) as config.json keys."""
    return {"hidden_size": recipe["hidden_size"], "intermediate_size": recipe["intermediate_size"],
            "num_hidden_layers": recipe["num_layers"], "num_attention_heads": recipe["num_heads"],
            "num_key_value_heads": recipe["num_kv_heads"], "vocab_size": recipe["vocab_size"],
            "max_position_embeddings": recipe["max_position_embeddings"], "torch_dtype": "bfloat16",
            "tie_word_embeddings": recipe.get("tie_word_embeddings", False)}


def _size(knobs: dict, *names) -> int:
    return next((int(knobs[n]) for n in names if knobs.get(n) is not None), 1)


def _quantization(config: dict, knobs: dict) -> tuple[str | None, dict]:
    q = config.get("quantization_config") or {}
    return (knobs.get("quantization") or q.get("quant_method")), q


def weight_bytes(config: dict, knobs: dict) -> float:
    """The whole model's weights as served: linear layers at the quantization's width
    (AWQ/GPTQ: their bits plus a 16-bit scale and a zero point per group; FP8: one byte),
    embeddings and head at the model's dtype."""
    params = decoder_params(config)
    if params is None:
        raise ValueError("the model's config lacks a decoder's sizes (hidden_size, num_hidden_layers, ...)")
    width = dtype_bytes(config, knobs)
    h = config["hidden_size"]
    embeddings = config["vocab_size"] * h * (1 if config.get("tie_word_embeddings") else 2)
    linear = params - embeddings
    method, q = _quantization(config, knobs)
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
        bits, group = q.get("bits", 4), q.get("group_size", 128)
        linear_bytes = linear * bits / 8 + linear / group * (2 + bits / 8)
    elif method and "fp8" in method:
        linear_bytes = linear * 1.0
    else:
        linear_bytes = linear * width
    return linear_bytes + embeddings * width


def dtype_bytes(config: dict, knobs: dict) -> int:
    dtype = knobs.get("dtype") or "auto"
    return DTYPE_BYTES.get(dtype) or DTYPE_BYTES.get(config.get("torch_dtype") or "bfloat16") or 2


def kv_bytes_per_token(config: dict, knobs: dict, tp: int, pp: int) -> int:
    """K and V of every layer a GPU holds, for one token: KV heads split over TP (each GPU
    keeps at least one), layers over PP, at the KV cache's dtype. Multi-head latent
    attention (DeepSeek) caches one latent of kv_lora_rank + qk_rope_head_dim a layer,
    whole on every TP rank."""
    width = 1 if str(knobs.get("kv_cache_dtype", "auto")).startswith("fp8") else dtype_bytes(config, knobs)
    layers = -(-config["num_hidden_layers"] // pp)
    if config.get("kv_lora_rank"):
        return layers * (config["kv_lora_rank"] + config["qk_rope_head_dim"]) * width
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    return 2 * layers * max(1, -(-kv_heads // tp)) * head_dim * width


def plan_point(config: dict, engine: str, knobs: dict, *, memory_gib: float, memory_name: str,
               device: str = "gpu", env: dict | None = None) -> PointPlan:
    """The plan of one server point with `memory_gib` per GPU (the host's on the CPU)."""
    tp = _size(knobs, "tensor_parallel_size", "tp", "tp_size")
    pp = _size(knobs, "pipeline_parallel_size", "pp_size")
    weights = weight_bytes(config, knobs) / GIB / (1 if device == "cpu" else tp * pp)
    per_token = kv_bytes_per_token(config, knobs, 1 if device == "cpu" else tp, 1 if device == "cpu" else pp)
    max_len = int(knobs.get("max_model_len") or knobs.get("context_length") or config.get("max_position_embeddings")
                  or 0)
    what = f"{memory_name} ({memory_gib:.1f} GiB)"
    budget = fraction = 0.0
    if device == "cpu":
        var, default_gib = facts.of(engine).cpu_kv_cache or (None, CPU_KV_GIB)
        kv_gib = float((env or {}).get(var) or default_gib) if var else default_gib
        why = None if weights + kv_gib <= memory_gib else \
            f"weights {weights:.2f} GiB + KV cache {kv_gib:g} GiB ({var or 'the default'}) exceed {what}"
    else:
        share = facts.of(engine).memory_share(memory_gib, knobs, tp=tp, pp=pp, moe=routed_experts(config) > 1)
        fraction, knob, reserved, budget = share.fraction, share.knob, share.reserved_gib, share.budget_gib
        kv_gib = budget - weights - reserved
        if share.kv_gib is not None:   # the engine then sizes its KV cache to that, per GPU
            kv_gib, budget, knob = share.kv_gib, weights + reserved + share.kv_gib, "kv_cache_memory_bytes"
        why = None if kv_gib > 0 else (
            f"no memory for the KV cache: {knob} {fraction:g} x {what} = {budget:.1f} GiB, less weights "
            f"{weights:.2f} GiB per GPU" + (f" and ~{reserved:g} GiB of activations" if reserved else "")
            + f" = {kv_gib:.1f} GiB")
    if device != "cpu" and why is None and budget > memory_gib:
        why = f"weights {weights:.2f} GiB + KV cache {kv_gib:.2f} GiB ({knob}) exceed {what}"
    tokens = max(0, int(kv_gib * GIB // per_token))
    warning = None
    if why is None and max_len and tokens < max_len:
        short = (f"the KV cache holds {tokens} tokens ({kv_gib:.2f} GiB at {per_token} B/token), fewer than one "
                 f"max_model_len {max_len} sequence")
        if tokens * (1 + PLAN_ERROR) >= max_len:
            warning = f"{short}, within the plan's own error ({PLAN_ERROR:.0%}): the engine may still start"
        else:
            why = short
    return PointPlan(memory=what, gpus=0 if device == "cpu" else tp * pp, weights_gib=round(weights, 2),
                     kv_bytes_per_token=per_token, kv_cache_gib=round(max(kv_gib, 0.0), 2), kv_cache_tokens=tokens,
                     max_model_len=max_len, sequences=tokens // max_len if max_len else 0, fits=why is None, why=why,
                     warning=warning, held_gib=round(budget, 2), start_gib=round(fraction * memory_gib, 2))


def plan_here(model_dir: str | Path, engine: str, knobs: dict, env: dict | None = None) -> PointPlan | None:
    """A session's plan on the machine it runs on: the memory of the GPUs its environment's
    CUDA_VISIBLE_DEVICES names (nvidia-smi), or the host's where there is no GPU; None where
    the model's config.json cannot be planned (no decoder sizes) or the engine loads no model
    into GPU memory of its own."""
    path = Path(model_dir) / "config.json"
    if not facts.of(engine).kv_capacity_sized or not path.is_file():
        return None
    config = json.loads(path.read_text())
    if decoder_params(config) is None:
        return None
    gpus = visible_gpus(env)
    if gpus:   # the session's GPUs; the smallest decides where they differ
        name, mib = min(gpus, key=lambda g: g[1])
        return plan_point(config, engine, knobs, memory_gib=mib / 1024, memory_name=name)
    return plan_point(config, engine, knobs, memory_gib=host_memory_gib(), memory_name="host memory",
                      device="cpu", env=env)


def model_config(config: dict, model: str) -> dict | None:
    """config.json of a model: its shape, the tiny recipe, or a fetched checkpoint's."""
    spec = config["models"][model]
    if "shape" in spec:
        return spec["shape"]["config"]
    if "tiny" in spec:
        return tiny_config(spec["tiny"])
    path = Path(config.get("paths", {}).get("models", "resources/models")) / model / "config.json"
    return json.loads(path.read_text()) if path.is_file() else None


def point_plan(config: dict, exp: dict, knobs: dict, memory_name: str, *, memory_gib: float,
               device: str = "gpu") -> PointPlan | None:
    """The capacity plan of one server point of `exp` (an experiment of `config`) on a device of `memory_gib`; None for
    an engine that loads no model of its own or a model whose shape is not known here."""
    from servelab.fetch.dummy_weights import served_knobs

    if not facts.of(exp["engine"]).kv_capacity_sized:
        return None
    model = point_model(exp, knobs)
    shape = model_config(config, model)
    if shape is None:
        return None
    env = {**config["engines"][exp["engine"]].get("env", {}), **exp.get("server", {}).get("env", {})}
    served = served_knobs(config, model, engine_flags(knobs)) if "shape" in \
        config["models"][model] else engine_flags(knobs)
    return plan_point(shape, exp["engine"], served, memory_gib=memory_gib, memory_name=memory_name,
                               device=device, env=env)


def together(plans: dict[str, PointPlan], memory_gib: float, order: list[str]) -> str | None:
    """Why the servers of `plans`, started in `order` (a rounds' first order), cannot be up at
    once on one GPU of `memory_gib` (None: they can). Each holds `held_gib` once up, and each
    asks at its start to find its share (`start_gib`) free of what those before it hold."""
    taken = 0.0
    for k, name in enumerate(order, 1):
        plan = plans[name]
        if memory_gib - taken < plan.start_gib:
            return (f"{name}, started after {', '.join(order[:k - 1])} ({taken:.1f} GiB held), asks at its start "
                    f"for its share {plan.start_gib:.1f} GiB free: {memory_gib - taken:.1f} GiB of the GPU's "
                    f"{memory_gib:.1f} GiB are")
        taken += plan.held_gib
        if taken > memory_gib:
            parts = " + ".join(f"{n} {plans[n].held_gib:g}" for n in order[:k])
            return (f"{k} of the {len(plans)} servers, held at once in their start order, take {parts} = "
                    f"{taken:.1f} GiB: over the GPU's {memory_gib:.1f} GiB")
    return None
