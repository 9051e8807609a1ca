"""Facts a server prints once at start-up, read from its log (week 4: KV blocks;
week 12: weight memory). vLLM 0.32's format strings:

    kv_cache_utils.py:  "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx"
    gpu_model_runner.py: "Model loading took %s GiB memory and %.6f seconds"
    weight_utils.py (CPU, no memory line): "... Checkpoint size: %.2f GiB ..."
"""

from __future__ import annotations

import re
from pathlib import Path

KV_CACHE = re.compile(r"(\w+) KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) "
                      r"tokens per request: ([\d.]+)x")
WEIGHTS_GPU = re.compile(r"Model loading took ([\d.]+) GiB memory")
WEIGHTS_CHECKPOINT = re.compile(r"Checkpoint size: ([\d.]+) GiB")


def facts(text: str) -> dict:
    """{kv_cache_tokens, kv_cache_device, max_concurrency_x, weights_gib}, for what the log shows.
    With several engine ranks (TP) the per-rank lines repeat: the first one is kept."""
    out: dict = {}
    if m := KV_CACHE.search(text):
        out.update(kv_cache_device=m[1], kv_cache_tokens=int(m[2].replace(",", "")),
                   max_concurrency_x=float(m[4]))
    if m := WEIGHTS_GPU.search(text) or WEIGHTS_CHECKPOINT.search(text):
        out["weights_gib"] = float(m[1])
    return out


def kv_blocks(kv_cache_tokens: int | None, block_size: int | None) -> int | None:
    """KV blocks the cache holds, when the point sets its block size (the log does
    not print the platform's default one)."""
    if kv_cache_tokens is None or not block_size:
        return None
    return kv_cache_tokens // int(block_size)


def read_facts(log: str | Path) -> dict:
    path = Path(log)
    return facts(path.read_text(errors="replace")) if path.exists() else {}
