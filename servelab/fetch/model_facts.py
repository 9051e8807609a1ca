"""What a fetched or built model is: its parameter count and the bytes its weights take
(the roofline's and each point's model size), read from its config.json and checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

BYTES_PER_PARAM = {"bfloat16": 2, "float16": 2, "float32": 4, "float8_e4m3fn": 1}


def decoder_params(config: dict) -> int | None:
    """Parameters of a decoder from its config.json: embeddings (and an untied head),
    attention (grouped-query, or DeepSeek's multi-head latent attention), every layer's MLP
    (dense, or a MoE's experts, shared experts and router: Mixtral, Qwen-MoE, DeepSeek), the norms."""
    if any(k not in config for k in ("hidden_size", "num_hidden_layers", "vocab_size", "num_attention_heads")):
        return None
    h, layers, vocab = config["hidden_size"], config["num_hidden_layers"], config["vocab_size"]
    embeddings = vocab * h * (1 if config.get("tie_word_embeddings") else 2)
    moe_layers = [layer for layer in range(layers) if is_moe_layer(config, layer)]
    if moe_layers and not config.get("moe_intermediate_size") and not config.get("intermediate_size"):
        return None
    if not moe_layers and not config.get("intermediate_size"):
        return None
    dense_mlp = 3 * h * (config.get("intermediate_size") or 0)
    per_layer = attention_params(config) + 2 * h
    return (embeddings + layers * per_layer + len(moe_layers) * moe_params(config)
            + (layers - len(moe_layers)) * dense_mlp + h)


def routed_experts(config: dict) -> int:
    return config.get("num_local_experts") or config.get("num_experts") or config.get("n_routed_experts") or 1


def is_moe_layer(config: dict, layer: int) -> bool:
    """Whether a layer's MLP is a mixture of experts: every layer of a Mixtral; Qwen-MoE's
    but its `mlp_only_layers` (every `decoder_sparse_step`-th); DeepSeek's from
    `first_k_dense_replace` on (every `moe_layer_freq`-th)."""
    if routed_experts(config) == 1:
        return False
    if "n_routed_experts" in config:
        return layer >= config.get("first_k_dense_replace", 0) and layer % config.get("moe_layer_freq", 1) == 0
    step = config.get("decoder_sparse_step", 1) or 1
    return layer not in (config.get("mlp_only_layers") or []) and (layer + 1) % step == 0


def moe_params(config: dict, *, routed: int | None = None) -> int:
    """One MoE layer's MLP: routed experts (all, or the `routed` a token goes to), shared
    experts (Qwen2-MoE's one of `shared_expert_intermediate_size` with its gate; DeepSeek's
    `n_shared_experts`), router."""
    h, experts = config["hidden_size"], routed_experts(config)
    expert = 3 * h * (config.get("moe_intermediate_size") or config["intermediate_size"])
    shared = 3 * h * (config.get("shared_expert_intermediate_size") or 0) + (h if config.get("shared_expert_intermediate_size") else 0)
    shared += (config.get("n_shared_experts") or 0) * expert
    return (routed or experts) * expert + shared + h * experts


def active_fraction(config: dict) -> float:
    """The share of the weights one token's decode step reads: all but the input embedding
    table, of which a lookup reads one row (unless the head shares it), and, for a MoE, the
    routed experts the token is not sent to (it goes to num_experts_per_tok of them). A
    batch reads more experts, so the share is a lower bound at any batch."""
    total = decoder_params(config)
    if not total:
        return 1.0
    unread = 0 if config.get("tie_word_embeddings") else config["vocab_size"] * config["hidden_size"]
    top_k = config.get("num_experts_per_tok")
    if top_k and routed_experts(config) > 1:
        moe_layers = sum(is_moe_layer(config, layer) for layer in range(config["num_hidden_layers"]))
        unread += moe_layers * (moe_params(config) - moe_params(config, routed=min(int(top_k), routed_experts(config))))
    return 1.0 - unread / total


def attention_params(config: dict) -> int:
    h, heads = config["hidden_size"], config["num_attention_heads"]
    if config.get("kv_lora_rank"):   # multi-head latent attention (DeepSeek-V2/V3)
        rope, nope, v = config["qk_rope_head_dim"], config["qk_nope_head_dim"], config["v_head_dim"]
        q_rank = config.get("q_lora_rank")
        q = h * q_rank + q_rank + q_rank * heads * (nope + rope) if q_rank else h * heads * (nope + rope)
        kv = h * (config["kv_lora_rank"] + rope) + config["kv_lora_rank"] + config["kv_lora_rank"] * heads * (nope + v)
        return q + kv + heads * v * h
    head_dim = config.get("head_dim") or h // heads
    kv_heads = config.get("num_key_value_heads") or heads
    return 2 * h * heads * head_dim + 2 * h * kv_heads * head_dim


def model_size(model_dir: str | Path) -> dict:
    """Bytes of the checkpoint's weights, its dtype (config.json) and the share of them one
    token's decode step reads (a MoE's active experts). A model by shape has no checkpoint:
    its size is what vLLM's random weights of that shape take."""
    model_dir = Path(model_dir)
    weights = sum(p.stat().st_size for p in model_dir.glob("*.safetensors"))
    config = json.loads((model_dir / "config.json").read_text()) if (model_dir / "config.json").exists() else {}
    dtype = config.get("torch_dtype") or config.get("dtype")
    if not weights and "quantization_config" not in config and (params := decoder_params(config)):
        weights = params * BYTES_PER_PARAM.get(dtype or "bfloat16", 2)
    return {"weight_bytes": weights, "dtype": dtype, "active_fraction": round(active_fraction(config), 4)}
