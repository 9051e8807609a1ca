"""What an SGLang server states once at start-up: its KV pool's capacity and weight memory,
from its log, its /metrics constants and its /server_info; for a P/D role, how it moves the
KV cache."""

from __future__ import annotations

import re

from servelab.engines.server_log import number

# SGLang 0.5.17: "max_total_num_tokens=410380, chunked_prefill_size=8192, ..." and
# "Load weight end. elapsed=0.23 s, type=LlamaForCausalLM, avail mem=63.45 GB, mem usage=15.02 GB."
KV_TOKENS = re.compile(r"\bmax_total_num_tokens=(\d+)")
WEIGHTS = re.compile(r"Load weight end\..*\bmem usage=([\d.]+) GB")
# how a P/D pair moves the KV cache, as SGLang 0.5.17's transfer backends log it:
#   mooncake: "transfer_engine_impl.cpp:488] Using TCP transport (no HCA detected)"
#   NIXL:     "NIXL KVManager initialized with backend: UCX"
KV_TRANSPORT = (("mooncake", re.compile(r"transfer_engine_impl\.cpp:\d+\] Using (\w+) transport(?: \(([^)]*)\))?")),
                ("nixl", re.compile(r"NIXL KVManager initialized with backend: (\w+)()")))
# its constants, emitted once at start-up (with --enable-metrics)
GAUGES = {"kv_cache_tokens": re.compile(r"^sglang:max_total_num_tokens(?:\{[^}]*\})? ([\d.e+]+)", re.MULTILINE),
          "weights_gib": re.compile(r"^sglang:weight_memory_usage_gb(?:\{[^}]*\})? ([\d.e+]+)", re.MULTILINE)}


def facts(log_text: str, metrics_text: str = "", info: dict | None = None) -> dict:
    """The log's facts, overridden by /metrics, then by /server_info, where they state them."""
    return {**log_facts(log_text), **metrics_facts(metrics_text), **info_facts(info or {})}


def log_facts(text: str) -> dict:
    """{kv_cache_tokens, weights_gib, kv_transport} from a start-up log, for what it shows."""
    out: dict = {}
    if m := KV_TOKENS.search(text):
        out["kv_cache_tokens"] = int(m[1])
    if m := WEIGHTS.search(text):
        out["weights_gib"] = float(m[1])
    for backend, pattern in KV_TRANSPORT:
        if m := pattern.search(text):
            out["kv_transport"] = f"{backend} over {m[1]}" + (f" ({m[2]})" if m[2] else "")
    return out


def metrics_facts(text: str) -> dict:
    """{kv_cache_tokens, weights_gib} from /metrics, for what it exports."""
    out: dict = {}
    for name, pattern in GAUGES.items():
        if (m := pattern.search(text)) and (value := number(m[1])):
            out[name] = int(value) if name == "kv_cache_tokens" else round(value, 3)
    return out


def info_facts(info: dict) -> dict:
    """/server_info: the KV pool's capacity (max_total_num_tokens; with data parallelism,
    each replica's in internal_states), its scheduling policy and, for a P/D role, its
    transfer backend."""
    out: dict = {}
    tokens = info.get("max_total_num_tokens")
    if tokens is None:
        tokens = next((s.get("max_total_num_tokens") for s in info.get("internal_states") or []
                       if isinstance(s, dict) and s.get("max_total_num_tokens") is not None), None)
    if tokens is not None:
        out["kv_cache_tokens"] = int(tokens)
    if info.get("schedule_policy") is not None:
        out["schedule_policy"] = info["schedule_policy"]
    # a P/D role's transfer backend (every server states the default, P/D or not)
    if info.get("disaggregation_mode") not in (None, "null"):
        out["disaggregation_mode"] = info["disaggregation_mode"]
        out["kv_transfer_backend"] = info.get("disaggregation_transfer_backend")
    return out
