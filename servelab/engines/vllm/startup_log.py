"""What a vLLM server states once at start-up, in its log and its /metrics (week 4: KV cache
capacity; week 12: weight memory; where the start-up's time went).

/metrics (vLLM 0.26 and 0.32 alike): `vllm:cache_config_info` carries the cache's
config as labels: num_gpu_blocks (the CPU backend uses the same name), block_size,
and in newer builds kv_cache_size_tokens and kv_cache_max_concurrency.

The log's wording differs between builds; every phrasing seen is matched:
    0.32 CPU:  "CPU KV cache size: 1,048,576 tokens, Maximum concurrency for 2,048 tokens per request: 512.00x"
    0.26 GPU:  "GPU KV cache size: 449,968 tokens"  then, on its own line,
               "Maximum concurrency for 4,096 tokens per request: 109.86x"
    0.32 GPU:  "Model loading took 14.99 GiB memory and 5.1 seconds"
    0.26 GPU:  "Model loading took 15.0 GiB and 3.578341 seconds"
    CPU (no memory line): "... Checkpoint size: 0.01 GiB ..."
"""

from __future__ import annotations

import re
from datetime import datetime

from servelab.engines import server_log
from servelab.engines.server_log import JIT_SPANS, TIMELINE_PHASES, number

KV_CACHE = re.compile(r"(\w+) KV cache size: ([\d,]+) tokens")
MAX_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
WEIGHTS_GPU = re.compile(r"Model loading took ([\d.]+) GiB(?: memory)? and")
WEIGHTS_CHECKPOINT = re.compile(r"Checkpoint size: ([\d.]+) GiB")
CACHE_CONFIG = re.compile(r"^vllm:cache_config_info\{(.*)\}\s", re.MULTILINE)
LABEL = re.compile(r'(\w+)="([^"]*)"')
# where a start-up's time goes (#18), each phase as vLLM's own log states it:
#   "Model loading took 15.0 GiB and 3.578341 seconds"  /  "Loading weights took 0.05 seconds"
#   "torch.compile took 29.28 s in total"
#   "Graph capturing finished in 7 secs, took 0.98 GiB"
#   "init engine (profile, create kv cache, warmup model) took 61.97 s"
STARTUP_PHASES = {
    "startup_weights_s": re.compile(r"(?:Model loading took [\d.]+ GiB(?: memory)? and|Loading weights took) "
                                    r"([\d.]+) s"),
    "startup_compile_s": re.compile(r"torch\.compile took ([\d.]+) s in total"),
    "startup_cuda_graphs_s": re.compile(r"Graph capturing finished in ([\d.]+) secs?"),
    "startup_engine_init_s": re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"),
}
# and from the lines' times: vLLM stamps each line to the second ("INFO 11-25 15:31:01 [...]")
VLLM_STAMP = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR) (\d\d-\d\d \d\d:\d\d:\d\d) \[")
ENGINE_PROCESS = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d) \[[^\]]*\] Initializing a V1 LLM engine")
# two spans inside the engine's init, from their lines' times (+-1 s), where a fresh box's
# start-up goes to FlashInfer's JIT builds (nvcc on the CPU while the GPUs wait; a warm box
# finds them cached, 0 s): the all-reduce fusion's workspace and the silent warm-up after
# the graphs (their lines and seconds on a fresh box: docs/measurements.md, "Figures behind
# the code's choices")
INIT_SPANS = dict(zip(JIT_SPANS, (
    (re.compile(r"Using flashinfer allreduce backend"),
     re.compile(r"Initialized FlashInfer Allreduce norm fusion workspace")),
    (re.compile(r"Graph capturing finished in"),
     re.compile(r"init engine \(profile, create kv cache, warmup model\) took")),
)))


def facts(log_text: str, metrics_text: str = "") -> dict:
    """The log's facts, overridden by /metrics where it states them (structured, and the
    same across builds)."""
    return {**log_facts(log_text), **metrics_facts(metrics_text)}


def log_facts(text: str) -> dict:
    """{kv_cache_device, kv_cache_tokens, max_concurrency_x, weights_gib}, the start-up's
    phases and its timeline from a start-up log, for what it shows. With several engine
    ranks (TP) the per-rank lines repeat: the first counts."""
    out: dict = {}
    if m := KV_CACHE.search(text):
        out.update(kv_cache_device=m[1], kv_cache_tokens=int(m[2].replace(",", "")))
    if m := MAX_CONCURRENCY.search(text):
        out["max_concurrency_x"] = float(m[2])
    if m := WEIGHTS_GPU.search(text) or WEIGHTS_CHECKPOINT.search(text):
        out["weights_gib"] = float(m[1])
    for name, pattern in STARTUP_PHASES.items():
        if m := pattern.search(text):
            out[name] = float(m[1])
    return {**out, **timeline(text)}


def timeline(text: str) -> dict:
    """{startup_imports_s, startup_frontend_s, startup_imported_ahead_s} and the INIT_SPANS
    from the lines' times, for what the log shows. Imports: the launch (a pre-started
    server's grant) to the engine's first line; frontend: from there to its engine process's
    first line (configuration, tokenizer, the process start). Each to +-1 s."""
    launch, own_lines_from, out = server_log.start_up_began(text)
    first = VLLM_STAMP.search(text, own_lines_from)
    engine = ENGINE_PROCESS.search(text)
    # vLLM's stamps have no year: the launch's (else 2000, which has a 29 February)
    stamp = lambda m: datetime.strptime(f"{launch.year if launch else 2000}-{m[1]}", "%Y-%m-%d %H:%M:%S")
    if first and launch:   # the stamp is cut to the second
        out[TIMELINE_PHASES[0]] = round(max((stamp(first) - launch).total_seconds(), 0.0), 3)
    if first and engine:
        out[TIMELINE_PHASES[1]] = (stamp(engine) - stamp(first)).total_seconds()
    for name, (begin, end) in INIT_SPANS.items():
        began, ended = line_stamp(text, begin), line_stamp(text, end)
        if began and ended:   # the first rank's lines: with TP the others repeat them
            out[name] = max((stamp(ended) - stamp(began)).total_seconds(), 0.0)
    return out


def line_stamp(text: str, pattern: re.Pattern) -> re.Match | None:
    """The vLLM stamp of the first line matching pattern: the last stamp before the match on
    its line (a TP worker's progress bar shares its line with other ranks' messages)."""
    if m := pattern.search(text):
        start = text.rfind("\n", 0, m.start()) + 1
        return next(reversed(list(VLLM_STAMP.finditer(text, start, m.start()))), None)
    return None


def metrics_facts(text: str) -> dict:
    """{kv_cache_blocks, kv_block_size, kv_cache_tokens, max_concurrency_x?} from /metrics
    (`vllm:cache_config_info`); empty where it has none (a router)."""
    m = CACHE_CONFIG.search(text)
    if not m:
        return {}
    labels = dict(LABEL.findall(m[1]))
    blocks, block_size = number(labels.get("num_gpu_blocks")), number(labels.get("block_size"))
    if blocks is None or block_size is None:
        return {}
    out = {"kv_cache_blocks": int(blocks), "kv_block_size": int(block_size),
           "kv_cache_tokens": int(number(labels.get("kv_cache_size_tokens")) or blocks * block_size)}
    if (concurrency := number(labels.get("kv_cache_max_concurrency"))) is not None:
        out["max_concurrency_x"] = concurrency
    return out
