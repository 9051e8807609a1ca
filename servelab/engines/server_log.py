"""Facts a server states once at start-up (week 4: KV cache capacity; week 12: weight
memory), from its Prometheus /metrics where it has them, else from its log.

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
from pathlib import Path

from servelab.engines import prestart

KV_CACHE = re.compile(r"(\w+) KV cache size: ([\d,]+) tokens")
# SGLang 0.5.17: "max_total_num_tokens=410380, chunked_prefill_size=8192, ..." and
# "Load weight end. elapsed=0.23 s, type=LlamaForCausalLM, avail mem=63.45 GB, mem usage=15.02 GB."
SGLANG_KV = re.compile(r"\bmax_total_num_tokens=(\d+)")
SGLANG_WEIGHTS = re.compile(r"Load weight end\..*\bmem usage=([\d.]+) GB")
MAX_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
WEIGHTS_GPU = re.compile(r"Model loading took ([\d.]+) GiB(?: memory)? and")
WEIGHTS_CHECKPOINT = re.compile(r"Checkpoint size: ([\d.]+) GiB")
CACHE_CONFIG = re.compile(r"^vllm:cache_config_info\{(.*)\}\s", re.MULTILINE)
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
# how a P/D pair moves the KV cache, as SGLang 0.5.17's transfer backends log it:
#   mooncake: "transfer_engine_impl.cpp:488] Using TCP transport (no HCA detected)"
#   NIXL:     "NIXL KVManager initialized with backend: UCX"
KV_TRANSPORT = (("mooncake", re.compile(r"transfer_engine_impl\.cpp:\d+\] Using (\w+) transport(?: \(([^)]*)\))?")),
                ("nixl", re.compile(r"NIXL KVManager initialized with backend: (\w+)()")))
LABEL = re.compile(r'(\w+)="([^"]*)"')
# and from the lines' times: vLLM stamps each line to the second ("INFO 11-25 15:31:01 [...]"),
# and servelab's launch stamps the log's first line (LAUNCH, written by serve/server.py)
LAUNCH = "servelab: launched at "
LOCAL_TIME = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)"
LAUNCHED = re.compile("^" + LAUNCH + LOCAL_TIME, re.MULTILINE)
# a pre-started server's (servelab.engines.prestart): its imports done, then its GPUs granted
IMPORTED = re.compile("^" + re.escape(prestart.IMPORTED) + LOCAL_TIME, re.MULTILINE)
GRANTED = re.compile("^" + re.escape(prestart.GRANTED) + LOCAL_TIME, re.MULTILINE)
VLLM_STAMP = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR) (\d\d-\d\d \d\d:\d\d:\d\d) \[")
ENGINE_PROCESS = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d) \[[^\]]*\] Initializing a V1 LLM engine")
# imports: launch (a pre-started server's grant) to the engine's first line; frontend: from
# there to its engine process's first line (configuration, tokenizer, the process start).
# Each to +-1 s. A pre-started server's imports ahead of its grant are not in its start-up.
TIMELINE_PHASES = ("startup_imports_s", "startup_frontend_s")
AHEAD = "startup_imported_ahead_s"
# two spans inside the engine's init, from their lines' times (+-1 s), where a fresh box's
# start-up goes to FlashInfer's JIT builds (nvcc on the CPU while the GPUs wait; a warm box
# finds them cached, 0 s): the all-reduce fusion's workspace and the silent warm-up after
# the graphs (their lines and seconds on a fresh box: docs/measurements.md, "Figures behind
# the code's choices")
INIT_SPANS = {
    "startup_allreduce_fusion_s": (re.compile(r"Using flashinfer allreduce backend"),
                                   re.compile(r"Initialized FlashInfer Allreduce norm fusion workspace")),
    "startup_warmup_s": (re.compile(r"Graph capturing finished in"),
                         re.compile(r"init engine \(profile, create kv cache, warmup model\) took")),
}
STARTUP_COLUMNS = (*STARTUP_PHASES, *TIMELINE_PHASES, *INIT_SPANS, AHEAD)


def facts(text: str) -> dict:
    """{kv_cache_device, kv_cache_tokens, max_concurrency_x, weights_gib} from a start-up log,
    for what it shows. With several engine ranks (TP) the per-rank lines repeat: the first counts."""
    out: dict = {}
    if m := KV_CACHE.search(text):
        out.update(kv_cache_device=m[1], kv_cache_tokens=int(m[2].replace(",", "")))
    if m := MAX_CONCURRENCY.search(text):
        out["max_concurrency_x"] = float(m[2])
    if m := WEIGHTS_GPU.search(text) or WEIGHTS_CHECKPOINT.search(text):
        out["weights_gib"] = float(m[1])
    if "kv_cache_tokens" not in out and (m := SGLANG_KV.search(text)):
        out["kv_cache_tokens"] = int(m[1])
    if "weights_gib" not in out and (m := SGLANG_WEIGHTS.search(text)):
        out["weights_gib"] = float(m[1])
    for name, pattern in STARTUP_PHASES.items():
        if m := pattern.search(text):
            out[name] = float(m[1])
    for backend, pattern in KV_TRANSPORT:
        if m := pattern.search(text):
            out["kv_transport"] = f"{backend} over {m[1]}" + (f" ({m[2]})" if m[2] else "")
    return {**out, **timeline(text)}


def timeline(text: str) -> dict:
    """{startup_imports_s, startup_frontend_s, startup_imported_ahead_s} and the INIT_SPANS
    from the lines' times, for what the log shows."""
    local = lambda m: datetime.strptime(m[1], prestart.TIME_FORMAT) if m else None
    granted_line = GRANTED.search(text)
    launched, imported, granted = local(LAUNCHED.search(text)), local(IMPORTED.search(text)), local(granted_line)
    # a pre-started server that waited for its GPUs: its start-up counts from the grant, and
    # its vLLM lines start after it (what its imports ahead logged is not its start)
    waited = bool(imported and granted and granted >= imported)
    launch = granted if waited else launched
    first = VLLM_STAMP.search(text, granted_line.end() if waited else 0)
    engine = ENGINE_PROCESS.search(text)
    # vLLM's stamps have no year: the launch's (else 2000, which has a 29 February)
    stamp = lambda m: datetime.strptime(f"{launch.year if launch else 2000}-{m[1]}", "%Y-%m-%d %H:%M:%S")
    out = {}
    if launched and waited:
        out[AHEAD] = round((imported - launched).total_seconds(), 3)
    if first and launch:   # the stamp is cut to the second
        out["startup_imports_s"] = round(max((stamp(first) - launch).total_seconds(), 0.0), 3)
    if first and engine:
        out["startup_frontend_s"] = (stamp(engine) - stamp(first)).total_seconds()
    for name, (begin, end) in INIT_SPANS.items():
        began, ended = line_stamp(text, begin), line_stamp(text, end)
        if began and ended:   # the first rank's lines: with TP the others repeat them
            out[name] = max((stamp(ended) - stamp(began)).total_seconds(), 0.0)
    return out


def jit_spans_s(facts: dict) -> float:
    """A start's seconds in the INIT_SPANS: on a fresh box, its GPUs waiting for FlashInfer's
    JIT builds (0-1 s once they are cached)."""
    return sum(facts.get(name) or 0.0 for name in INIT_SPANS)


def line_stamp(text: str, pattern: re.Pattern) -> re.Match | None:
    """The vLLM stamp of the first line matching pattern: the last stamp before the match on
    its line (a TP worker's progress bar shares its line with other ranks' messages)."""
    if m := pattern.search(text):
        start = text.rfind("\n", 0, m.start()) + 1
        return next(reversed(list(VLLM_STAMP.finditer(text, start, m.start()))), None)
    return None


def launch_line() -> bytes:
    """The first line of a server's log, written as it is launched (local time, as vLLM's)."""
    return f"{LAUNCH}{datetime.now():{prestart.TIME_FORMAT}}\n".encode()


def number(value: str | None) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):   # "None" where the engine left it unset
        return None


# SGLang's constants, emitted once at start-up (with --enable-metrics)
SGLANG_GAUGES = {"kv_cache_tokens": re.compile(r"^sglang:max_total_num_tokens(?:\{[^}]*\})? ([\d.e+]+)", re.MULTILINE),
                 "weights_gib": re.compile(r"^sglang:weight_memory_usage_gb(?:\{[^}]*\})? ([\d.e+]+)", re.MULTILINE)}


def sglang_metrics_facts(text: str) -> dict:
    """{kv_cache_tokens, weights_gib} from SGLang's /metrics, for what it exports."""
    out: dict = {}
    for name, pattern in SGLANG_GAUGES.items():
        if (m := pattern.search(text)) and (value := number(m[1])):
            out[name] = int(value) if name == "kv_cache_tokens" else round(value, 3)
    return out


def server_info_facts(info: dict) -> dict:
    """SGLang's /server_info: the KV pool's capacity (max_total_num_tokens; with data
    parallelism, each replica's in internal_states), its scheduling policy and, for a
    P/D role, its transfer backend."""
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


def scrape_server_info(base_url: str, path: str | None) -> dict:
    """The engine's structured facts endpoint (SGLang's /server_info), or {}."""
    import requests

    if not path:
        return {}
    try:
        response = requests.get(base_url + path, timeout=10)
        return server_info_facts(response.json()) if response.ok else {}
    except (requests.RequestException, ValueError):
        return {}


def metrics_facts(text: str) -> dict:
    """{kv_cache_blocks, kv_block_size, kv_cache_tokens, max_concurrency_x?} from /metrics
    (vLLM's `vllm:cache_config_info`); SGLang's constants where it exports those; empty
    for a router."""
    m = CACHE_CONFIG.search(text)
    if not m:
        return sglang_metrics_facts(text)
    labels = dict(LABEL.findall(m[1]))
    blocks, block_size = number(labels.get("num_gpu_blocks")), number(labels.get("block_size"))
    if blocks is None or block_size is None:
        return {}
    out = {"kv_cache_blocks": int(blocks), "kv_block_size": int(block_size),
           "kv_cache_tokens": int(number(labels.get("kv_cache_size_tokens")) or blocks * block_size)}
    if (concurrency := number(labels.get("kv_cache_max_concurrency"))) is not None:
        out["max_concurrency_x"] = concurrency
    return out


def startup_facts(log_text: str, metrics_text: str = "") -> dict:
    """The log's facts, overridden by /metrics where it states them (structured, and the
    same across builds)."""
    return {**facts(log_text), **metrics_facts(metrics_text)}


def kv_blocks(facts: dict, block_size: int | None) -> int | None:
    """KV blocks the cache holds: from /metrics, else from the token count when the point
    sets its block size (the log does not print the platform's default one)."""
    if facts.get("kv_cache_blocks") is not None:
        return facts["kv_cache_blocks"]
    if facts.get("kv_cache_tokens") is None or not block_size:
        return None
    return facts["kv_cache_tokens"] // int(block_size)


def read_facts(log: str | Path, metrics_text: str = "") -> dict:
    path = Path(log)
    return startup_facts(path.read_text(errors="replace") if path.exists() else "", metrics_text)


def scrape_metrics(base_url: str) -> str:
    """The server's /metrics text, or "" where it has none (a router, an engine without it)."""
    import requests

    try:
        response = requests.get(base_url + "/metrics", timeout=10)
        return response.text if response.ok else ""
    except requests.RequestException:
        return ""
