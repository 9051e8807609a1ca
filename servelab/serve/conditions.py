"""The conditions a point was measured under, recorded with it:

- the engine's own counters over the point's window (/metrics before and after, and the
  peak KV-cache usage sampled during it): prefix-cache hit rate, speculative acceptance
  rate and mean accepted length, preemptions;
- load from outside the session: CPU time that processes other than the session's own
  took during the point, and processes of others on the point's GPUs (nvidia-smi);
- the prefix-cache reset before it (vLLM's /reset_prefix_cache, SGLang's /flush_cache),
  so that a later point never hits blocks an earlier one cached.
"""

from __future__ import annotations

import math
import os
import resource
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import requests

from servelab import machine
from servelab.engines.registry import ENGINES
from servelab.serve.monitors import parse_prometheus

# each engine's /metrics counters by meaning, its KV transfers' histogram and its KV usage
# gauge (the engines' faces declare them): /metrics names carry their engine's prefix, so
# one table serves a server of any engine
COUNTERS = {name: series for e in ENGINES.values() for name, series in e.counter_metrics.items()}
KV_TRANSFER_BUCKETS = tuple(e.kv_transfer_buckets for e in ENGINES.values() if e.kv_transfer_buckets)
BUCKET = "kv_transfer_le:"
LE = re.compile(r'\ble="([^"]+)"')
KV_USAGE = tuple(e.timeline_metrics["kv_usage"] for e in ENGINES.values() if "kv_usage" in e.timeline_metrics)


def counter_totals(text: str) -> dict[str, float]:
    """Each counter summed over its label sets (engines, models); absent ones left out."""
    totals: dict[str, float] = {}
    wanted = {metric: name for name, metric in COUNTERS.items()}
    for metric, labels, value in parse_prometheus(text, (*wanted, *KV_TRANSFER_BUCKETS)):
        if metric in wanted:
            totals[wanted[metric]] = totals.get(wanted[metric], 0.0) + value
        elif metric in KV_TRANSFER_BUCKETS and (le := LE.search(labels)):
            totals[BUCKET + le[1]] = totals.get(BUCKET + le[1], 0.0) + value
    return totals


def histogram_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """The q-quantile of a cumulative histogram {upper bound: count}, interpolated within
    its bucket as Prometheus' histogram_quantile does; None without observations."""
    bounds = sorted(buckets)
    if not bounds or not buckets[bounds[-1]]:
        return None
    rank, lower, below = q * buckets[bounds[-1]], 0.0, 0.0
    for bound in bounds:
        if buckets[bound] >= rank:
            if math.isinf(bound):
                return lower   # beyond the last finite bound: that bound is all one can say
            inside = buckets[bound] - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = bound, buckets[bound]
    return None


def kv_transfer_columns(delta: dict[str, float]) -> dict:
    """A P/D point's KV transfers: how many, their mean and p90 time, MB each, failures."""
    n = delta.get("kv_transfers")
    if not n:
        return {"kv_failed_transfers": delta.get("kv_failed_transfers")} if delta.get("kv_failed_transfers") else {}
    buckets = {float(k[len(BUCKET):]): v for k, v in delta.items() if k.startswith(BUCKET)}
    p90 = histogram_quantile(0.9, buckets)
    return {"kv_transfers": n,
            "kv_transfer_mean_ms": 1e3 * delta.get("kv_transfer_s", 0.0) / n,
            "kv_transfer_p90_ms": 1e3 * p90 if p90 is not None else None,
            "kv_transfer_mb": delta.get("kv_bytes", 0.0) / n / 2**20,
            "kv_failed_transfers": delta.get("kv_failed_transfers", 0.0)}


def kv_usage(text: str) -> float | None:
    values = [value for _, _, value in parse_prometheus(text, KV_USAGE)]
    return max(values) if values else None


def counter_columns(before: dict[str, float], after: dict[str, float], peak_kv: float | None) -> dict:
    """The point's own share of the engine's counters, as the table's columns."""
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    queries, drafts, draft_tokens = delta.get("prefix_queries"), delta.get("spec_drafts"), delta.get("spec_draft_tokens")
    prompt_tokens = delta.get("prompt_tokens")
    if queries:
        hit_rate = delta.get("prefix_hits", 0.0) / queries
    elif prompt_tokens:   # SGLang's radix cache: cached over prompt tokens
        hit_rate = delta.get("cached_tokens", 0.0) / prompt_tokens
    else:
        hit_rate = None
    return {
        "prefix_cache_hit_rate": hit_rate,
        "spec_acceptance_rate": delta["spec_accepted"] / draft_tokens if draft_tokens else None,
        # tokens per draft step: the accepted ones plus the one the target model adds
        "spec_mean_accepted_len": 1 + delta["spec_accepted"] / drafts if drafts else None,
        "preemptions": delta.get("preemptions"),
        "peak_kv_cache_usage": peak_kv,
        **kv_transfer_columns(delta),
    }


def scrape(url: str) -> str:
    try:
        response = requests.get(url, timeout=5)
        return response.text if response.ok else ""
    except requests.RequestException:
        return ""


class EngineCounters:
    """Context manager around one point: /metrics before and after, the KV-cache usage
    sampled every `interval_s` between (None: not between; a point's record samples it, its peak
    set from there); `result()` the point's columns. Several URLs
    (data-parallel replicas): their counters summed, the peak usage the largest."""

    # each scrape has the API server render /metrics, CPU taken from the engine on a small
    # box: sample sparsely (the before and after scrapes hold the counters exactly)
    def __init__(self, metrics_urls: str | list[str] | None, interval_s: float | None = 2.0):
        self.urls = [metrics_urls] if isinstance(metrics_urls, str) else list(metrics_urls or [])
        self.interval_s = interval_s
        self.before: dict[str, float] = {}
        self.after: dict[str, float] = {}
        self.peak_kv: float | None = None
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def sample(self) -> str:
        text = "\n".join(scrape(url) for url in self.urls)
        if (usage := kv_usage(text)) is not None:
            self.peak_kv = max(self.peak_kv or 0.0, usage)
        return text

    def loop(self) -> None:
        while not self.stop_event.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> "EngineCounters":
        if self.urls:
            self.before = counter_totals(self.sample())
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.urls:
            self.stop_event.set()
            self.thread.join(timeout=10)
            self.after = counter_totals(self.sample())

    def result(self) -> dict:
        if not self.after:
            return {}
        return {k: v for k, v in counter_columns(self.before, self.after, self.peak_kv).items() if v is not None}


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def machine_busy_s(stat: Path = Path("/proc/stat")) -> float:
    """CPU seconds the whole machine spent busy (all cores) since boot."""
    fields = [int(v) for v in stat.read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)   # idle + iowait
    return (sum(fields[:8]) - idle) / CLOCK_TICKS


def process_table(proc: Path = Path("/proc")) -> dict[int, tuple[int, int, float]]:
    """{pid: (parent pid, process group, CPU seconds of it and its waited-for children)}."""
    table = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended while we looked
        cpu = sum(int(v) for v in fields[11:15]) / CLOCK_TICKS   # utime stime cutime cstime
        table[int(entry.name)] = (int(fields[1]), int(fields[2]), cpu)
    return table


def session_cpu_s(table: dict[int, tuple[int, int, float]], root: int, pgids: set[int]) -> float:
    """CPU seconds of the session: `root` and its descendants, and the server groups."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    ours, stack = set(), [root]
    while stack:
        pid = stack.pop()
        if pid not in ours:
            ours.add(pid)
            stack += children.get(pid, [])
    ours |= {pid for pid, (_, pgid, _) in table.items() if pgid in pgids}
    return sum(table[pid][2] for pid in ours if pid in table)


def gpu_processes_of_others(env: dict, ours: set[int]) -> int | None:
    """Compute processes on this point's GPUs that are not the session's (None: no nvidia-smi)."""
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if not smi:
        return None
    try:
        gpus = subprocess.run([smi, "--query-gpu=index,pci.bus_id", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=10).stdout
        apps = subprocess.run([smi, "--query-compute-apps=pid,gpu_bus_id", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return len(others_on_gpus(gpus, apps, machine.visible_indices(env), ours))


def others_on_gpus(gpus_csv: str, apps_csv: str, visible: set[int] | None, ours: set[int]) -> list[int]:
    """PIDs of compute apps on the visible GPUs that are not ours, from nvidia-smi's CSV."""
    bus_of = {}
    for line in gpus_csv.strip().splitlines():
        index, _, bus = (part.strip() for part in line.partition(","))
        if index.isdigit():
            bus_of[bus.lower()] = int(index)
    others = []
    for line in apps_csv.strip().splitlines():
        pid, _, bus = (part.strip() for part in line.partition(","))
        index = bus_of.get(bus.lower())
        if pid.isdigit() and int(pid) not in ours and (visible is None or index in visible):
            others.append(int(pid))
    return others


class OutsideLoad:
    """Context manager around one point: how many cores' worth of CPU time processes outside
    the session took (`outside_cpu_cores`), and other processes on its GPUs. With the point's
    benchmark `client`, also the client's own (`client_cpu_cores`): this process's (an
    in-process client, with the session's samplers), its waited-for children's (a client
    subprocess such as AIPerf, with every process it waited for) and the clients the zygote
    forked for it (`forked_cpu_s`, counted as the session's, not the outside's)."""

    def __init__(self, server_pgids: list[int], env: dict, client=None):
        self.pgids, self.env, self.client = set(server_pgids), env, client
        self.root = os.getpid()

    def snapshot(self) -> tuple[float, float, float, float]:
        """(time, the machine's busy CPU s, the session's CPU s, the client's CPU s)."""
        forked = getattr(self.client, "forked_cpu_s", 0.0)
        own, waited = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        client = own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime + forked
        return (time.monotonic(), machine_busy_s(), session_cpu_s(process_table(), self.root, self.pgids) + forked,
                client)

    def __enter__(self) -> "OutsideLoad":
        self.start = self.snapshot()
        return self

    def __exit__(self, *exc) -> None:
        self.end = self.snapshot()
        ours = {pid for pid, (_, pgid, _) in process_table().items() if pgid in self.pgids}
        self.gpu_others = gpu_processes_of_others(self.env, ours | {self.root})

    def lap(self) -> dict:
        """The load since the last lap (or the start), a new lap begun: for the points that
        one process measures one after another (an offline runner)."""
        self.__exit__(None, None, None)
        result = self.result()
        self.start = self.end
        return result

    def result(self) -> dict:
        wall = self.end[0] - self.start[0]
        ours = self.end[2] - self.start[2]
        outside = (self.end[1] - self.start[1]) - ours
        client = self.end[3] - self.start[3]
        return {"outside_cpu_cores": round(max(outside, 0.0) / wall, 3) if wall > 0 else None,
                # what the session itself kept busy: with the outside's, whether the cores ran short
                "session_cpu_cores": round(max(ours, 0.0) / wall, 3) if wall > 0 else None,
                **({"client_cpu_cores": round(max(client, 0.0) / wall, 3) if wall > 0 else None}
                   if self.client is not None else {}),
                "machine_cores": os.cpu_count(),
                **({"outside_gpu_processes": self.gpu_others} if self.gpu_others is not None else {})}


def reset_prefix_cache(base_urls: list[str], path: str | None) -> bool | None:
    """Empty the engines' prefix caches (True when every server confirmed it; None: the
    engine offers no reset). A reset refused while blocks are held is tried again."""
    if not path:
        return None
    for url in base_urls:
        for attempt in range(5):
            try:
                response = requests.post(url + path, timeout=30)
            except requests.RequestException:
                return False
            body = response.json() if "json" in response.headers.get("content-type", "") else {}
            if response.ok and body.get("success", True):
                break
            if response.status_code == 404:
                return False     # the endpoint is not there (vLLM without its dev mode)
            time.sleep(0.5)
        else:
            return False
    return True
