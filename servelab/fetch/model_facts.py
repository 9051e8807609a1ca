"""What a fetched or built model is: its parameter count and the bytes its weights take
(the roofline's and each point's model size), read from its config.json and checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

BYTES_PER_PARAM = {"bfloat16": 2, "float16": 2, "float32": 4, "float8_e4m3fn": 1}


def decoder_params(config: dict) -> int | None:
    """Parameters of a Llama/Mixtral-style decoder from its config.json: embeddings (and an
    untied head), attention, the MLP of every expert (MoE) and its router, the norms."""
    try:
        h, layers, vocab = config["hidden_size"], config["num_hidden_layers"], config["vocab_size"]
        heads, inter = config["num_attention_heads"], config["intermediate_size"]
    except KeyError:
        return None
    head_dim = config.get("head_dim") or h // heads
    kv_heads = config.get("num_key_value_heads") or heads
    experts = config.get("num_local_experts") or 1
    attention = 2 * h * heads * head_dim + 2 * h * kv_heads * head_dim
    mlp = experts * 3 * h * inter + (h * experts if experts > 1 else 0)
    embeddings = vocab * h * (1 if config.get("tie_word_embeddings") else 2)
    return embeddings + layers * (attention + mlp + 2 * h) + h


def model_size(model_dir: str | Path) -> dict:
    """Bytes of the checkpoint's weights and its dtype (config.json). A model by shape has
    no checkpoint: its size is what vLLM's random weights of that shape take."""
    model_dir = Path(model_dir)
    weights = sum(p.stat().st_size for p in model_dir.glob("*.safetensors"))
    config = json.loads((model_dir / "config.json").read_text()) if (model_dir / "config.json").exists() else {}
    dtype = config.get("torch_dtype") or config.get("dtype")
    if not weights and "quantization_config" not in config and (params := decoder_params(config)):
        weights = params * BYTES_PER_PARAM.get(dtype or "bfloat16", 2)
    return {"weight_bytes": weights, "dtype": dtype}
