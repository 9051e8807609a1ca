"""What every engine's start-up log shares, and how a session reads what a server stated
once at start-up: its engine's own wording is in its folder (`startup_log.py`: vLLM's log
and /metrics, SGLang's log, /metrics and /server_info), asked through its face's
`startup_facts`.

Shared: the line servelab writes as it launches a server (LAUNCH), a pre-started server's
lines (servelab.engines.prestart: its imports done, then its GPUs granted), the start-up's
columns of a point's record, and fetching /metrics and an info endpoint."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from servelab.engines import prestart

# the start-up's columns of a point's record; an engine's log fills those it states
# (vLLM's, every one): its phases as its log states them ...
PHASES = ("startup_weights_s", "startup_compile_s", "startup_cuda_graphs_s", "startup_engine_init_s")
# ... from its lines' times: imports, the launch (a pre-started server's grant) to the
# engine's first line; frontend, from there to its engine process's first line ...
TIMELINE_PHASES = ("startup_imports_s", "startup_frontend_s")
# ... two spans inside the engine's init where a fresh box's start-up goes to FlashInfer's
# JIT builds (0-1 s once cached) ...
JIT_SPANS = ("startup_allreduce_fusion_s", "startup_warmup_s")
# ... and a pre-started server's imports ahead of its grant, which are not in its start-up
AHEAD = "startup_imported_ahead_s"
STARTUP_COLUMNS = (*PHASES, *TIMELINE_PHASES, *JIT_SPANS, AHEAD)

LAUNCH = "servelab: launched at "   # the log's first line, written by serve/server.py
LOCAL_TIME = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)"
LAUNCHED = re.compile("^" + LAUNCH + LOCAL_TIME, re.MULTILINE)
IMPORTED = re.compile("^" + re.escape(prestart.IMPORTED) + LOCAL_TIME, re.MULTILINE)
GRANTED = re.compile("^" + re.escape(prestart.GRANTED) + LOCAL_TIME, re.MULTILINE)


def launch_line() -> bytes:
    """The first line of a server's log, written as it is launched (local time, as vLLM's)."""
    return f"{LAUNCH}{datetime.now():{prestart.TIME_FORMAT}}\n".encode()


def start_up_began(text: str) -> tuple[datetime | None, int, dict]:
    """When the start-up began (the launch, or the grant of a pre-started server that waited
    for its GPUs), where the engine's own lines of that start-up begin in the log, and
    {startup_imported_ahead_s} of such a server (what its imports ahead logged is not its start)."""
    local = lambda m: datetime.strptime(m[1], prestart.TIME_FORMAT) if m else None
    granted_line = GRANTED.search(text)
    launched, imported, granted = local(LAUNCHED.search(text)), local(IMPORTED.search(text)), local(granted_line)
    if imported and granted and granted >= imported:
        return granted, granted_line.end(), ({AHEAD: round((imported - launched).total_seconds(), 3)}
                                             if launched else {})
    return launched, 0, {}


def jit_spans_s(facts: dict) -> float:
    """A start's seconds in the JIT_SPANS: on a fresh box, its GPUs waiting for FlashInfer's
    JIT builds (0-1 s once they are cached)."""
    return sum(facts.get(name) or 0.0 for name in JIT_SPANS)


def number(value: str | None) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):   # "None" where the engine left it unset
        return None


def kv_blocks(facts: dict, block_size: int | None) -> int | None:
    """KV blocks the cache holds: from /metrics, else from the token count when the point
    sets its block size (the log does not print the platform's default one)."""
    if facts.get("kv_cache_blocks") is not None:
        return facts["kv_cache_blocks"]
    if facts.get("kv_cache_tokens") is None or not block_size:
        return None
    return facts["kv_cache_tokens"] // int(block_size)


def read_facts(log: str | Path, engine, metrics_text: str = "", info: dict | None = None) -> dict:
    """What the server's start-up stated, in its engine's wording (`engine.startup_facts`):
    its log, where it exists, and the /metrics and info endpoint's answers given."""
    path = Path(log)
    return engine.startup_facts(path.read_text(errors="replace") if path.exists() else "", metrics_text, info or {})


def scrape_metrics(base_url: str) -> str:
    """The server's /metrics text, or "" where it has none (a router, an engine without it)."""
    import requests

    try:
        response = requests.get(base_url + "/metrics", timeout=10)
        return response.text if response.ok else ""
    except requests.RequestException:
        return ""


def scrape_info(base_url: str, path: str | None) -> dict:
    """The engine's structured facts endpoint (its face's `info_path`), or {}."""
    import requests

    if not path:
        return {}
    try:
        response = requests.get(base_url + path, timeout=10)
        answer = response.json() if response.ok else {}
        return answer if isinstance(answer, dict) else {}
    except (requests.RequestException, ValueError):
        return {}
