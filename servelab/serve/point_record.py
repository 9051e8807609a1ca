"""What the server and the machine did while a point ran, tick by tick: the point's record
of its conditions (store/KEY/conditions.json.gz), on for every point.

Each tick (`interval_s`: 0.5 s on a GPU, 1 s on a CPU) it keeps
- the CPU of each of the session's processes, summed by role: the engine's own roles by
  process title (the engine's `process_roles`: engine core, worker...; any other process
  of a server is its API server), and the client: this process (vLLM's in-process client)
  and the clients a zygote forked for it; and how long each role's processes waited,
  runnable, for a CPU (the kernel's schedstat: a busy or shared host);
- the machine's busy CPU and, on a virtual machine, what its hypervisor stole (`steal`);
- on a GPU, NVML's figures of each of the point's GPUs (SM and memory utilization, SM clock,
  power, the reasons its clocks are held down);
and every other tick the engine's /metrics series (`timeline_metrics`: running and waiting
requests, KV usage, token and step counters; a scrape costs the API server CPU). It is the
point's only sampler of /metrics: the engine's counters (servelab.serve.conditions) are read
once before and once after, their KV peak taken from the record.

Reading /proc and NVML costs this process about a millisecond a tick; what the record costs
the measurement is measured on a GPU (docs/point-record.md).
"""

from __future__ import annotations

import gzip
import json
import resource
import threading
import time
from pathlib import Path

from servelab.raw_result import CONDITIONS
from servelab.serve import conditions, monitors
from servelab.serve.process_tree import group_processes

FILE = CONDITIONS
CLIENT = "client"
REWALK = 5   # ticks between walks of /proc for the servers' processes
API_SERVER = "API server"


OFFLINE_RUNNER = "offline runner"   # an offline benchmark's own process (the engine built inside it)


def role_of(title: str, roles: dict[str, str], default: str = API_SERVER) -> str:
    return next((role for prefix, role in roles.items() if title.startswith(prefix)), default)


def process_cpu_s(pid: int) -> float | None:
    """A process's own CPU seconds (user + system), None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / conditions.CLOCK_TICKS


def runqueue_wait_s(pid: int) -> float | None:
    """Seconds a process has waited, runnable, for a CPU (/proc/PID/schedstat's second field;
    None where the kernel keeps no schedstat)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def host_cpu_s() -> dict[str, float]:
    """The machine's CPU seconds so far, all CPUs: busy (user, nice, system, irq, softirq)
    and stolen by the hypervisor (a virtual machine's `steal`)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    fields += [0] * (8 - len(fields))
    busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6]
    return {"busy_s": busy / conditions.CLOCK_TICKS, "steal_s": fields[7] / conditions.CLOCK_TICKS}


def series_values(text: str, names: dict[str, str]) -> dict[str, float]:
    """{series: value} of /metrics (several servers' texts joined: their values summed;
    a usage fraction: the largest)."""
    found: dict[str, float] = {}
    by_metric = {metric: series for series, metric in names.items()}
    for metric, _labels, value in monitors.parse_prometheus(text, tuple(by_metric)):
        series = by_metric.get(metric)
        if series is None:
            continue
        found[series] = max(found.get(series, value), value) if series == "kv_usage" else \
            found.get(series, 0.0) + value
    return found


class Nvml:
    """NVML's figures of the point's GPUs, through nvidia-ml-py (vLLM's own dependency);
    nothing where it is not installed or finds no GPU."""

    FIELDS = ("sm_util_pct", "mem_util_pct", "sm_clock_mhz", "power_w", "throttle")

    def __init__(self, visible: set[int] | None):
        self.handles = []
        try:
            import pynvml

            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)
                            if visible is None or i in visible]
            self.nvml = pynvml
        except Exception:   # no library, no driver, no GPU: a CPU run
            self.handles = []

    def sample(self) -> dict[str, float] | None:
        """The GPUs' mean utilization, clock and power; `throttle` the OR of their reasons."""
        if not self.handles:
            return None
        nv, rows = self.nvml, []
        try:
            for h in self.handles:
                util = nv.nvmlDeviceGetUtilizationRates(h)
                reasons = (nv.nvmlDeviceGetCurrentClocksEventReasons(h)
                           if hasattr(nv, "nvmlDeviceGetCurrentClocksEventReasons")
                           else nv.nvmlDeviceGetCurrentClocksThrottleReasons(h))
                rows.append((util.gpu, util.memory, nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                             nv.nvmlDeviceGetPowerUsage(h) / 1000.0, reasons))
        except Exception:
            return None
        n = len(rows)
        out = {f: sum(r[i] for r in rows) / n for i, f in enumerate(self.FIELDS[:4])}
        throttle = 0
        for r in rows:
            throttle |= int(r[4])
        out["throttle"] = throttle
        return out


class PointRecord:
    """Context manager around one point: its conditions, tick by tick (`result()`)."""

    def __init__(self, metrics_urls: list[str], pgids: list[int], roles: dict[str, str], names: dict[str, str],
                 visible_gpus: set[int] | None, client=None, interval_s: float | None = None,
                 metrics_every: int | None = None, default_role: str = API_SERVER, rewalk: int = REWALK):
        self.urls, self.pgids, self.roles, self.names, self.client = metrics_urls, pgids, roles, names, client
        self.default_role = default_role   # a process no engine role names: a server's API server
        self.lap_from = 0
        self.rewalk = rewalk   # ticks between walks of /proc
        nvml = Nvml(visible_gpus)
        self.nvml = nvml if nvml.handles else None
        self.interval_s = interval_s or (0.5 if self.nvml else 1.0)
        # /metrics once a second on a GPU (every other tick), every 2 s on a CPU: a scrape
        # costs the API server CPU, which the engine shares on a small box
        self.metrics_every = metrics_every or 2
        self.ticks: list[dict] = []
        self.last_cpu: dict[tuple[int, str], float] = {}
        self.last_wait: dict[tuple[int, str], float] = {}
        self.last_host: dict[str, float] | None = None
        self.known: dict[int, str] = {}
        self.known_at = -1
        self.stop_event = threading.Event()
        self.ticking = threading.Lock()   # a lap's closing tick beside the loop's
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def client_cpu_s(self) -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        return own.ru_utime + own.ru_stime + getattr(self.client, "forked_cpu_s", 0.0)

    def processes(self) -> dict[int, str]:
        """The servers' processes: /proc walked every REWALK ticks (a walk reads every
        process's stat; it holds the GIL the in-process client needs), else the last list."""
        self.ticks_since_walk = getattr(self, "ticks_since_walk", self.rewalk)
        if self.known_at < 0 or self.ticks_since_walk >= self.rewalk:
            self.known = {pid: title for pgid in self.pgids for pid, title in group_processes(pgid).items()}
            self.known_at, self.ticks_since_walk = 0, 0
        self.ticks_since_walk += 1
        return self.known

    def peak(self, series: str) -> float | None:
        """The largest value of a /metrics series over the point (e.g. the KV cache's usage)."""
        values = [t["metrics"][series] for t in self.ticks if series in (t.get("metrics") or {})]
        return max(values) if values else None

    def cpu_by_role(self) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
        """CPU seconds used since the last tick by role, by each role's busiest process, and
        the seconds the role's processes waited runnable for a CPU (a process seen for the
        first time counts from this tick on)."""
        used: dict[str, float] = {}
        top: dict[str, float] = {}
        waited: dict[str, float] = {}
        seen, seen_wait = {}, {}
        for pid, title in self.processes().items():
            if (cpu := process_cpu_s(pid)) is None:
                self.known_at = -1   # one has gone: look again next tick
                continue
            key = (pid, title.split(" ")[0])
            seen[key] = cpu
            role = role_of(title, self.roles, self.default_role)
            if key in self.last_cpu:
                delta = max(cpu - self.last_cpu[key], 0.0)
                used[role] = used.get(role, 0.0) + delta
                top[role] = max(top.get(role, 0.0), delta)
            if (wait := runqueue_wait_s(pid)) is not None:
                seen_wait[key] = wait
                if key in self.last_wait:
                    waited[role] = waited.get(role, 0.0) + max(wait - self.last_wait[key], 0.0)
        self.last_wait = seen_wait
        cpu = self.client_cpu_s()
        if (CLIENT, "") in self.last_cpu:
            used[CLIENT] = top[CLIENT] = max(cpu - self.last_cpu[(CLIENT, "")], 0.0)
        seen[(CLIENT, "")] = cpu
        self.last_cpu = seen
        return used, top, waited

    def host_since(self) -> dict[str, float] | None:
        """The machine's busy and stolen CPU seconds since the last tick."""
        try:
            now = host_cpu_s()
        except (OSError, ValueError):
            return None
        before, self.last_host = self.last_host, now
        return None if before is None else {k: round(now[k] - before[k], 3) for k in now}

    def tick(self, n: int) -> None:
        with self.ticking:
            self.tick_now(n)

    def tick_now(self, n: int) -> None:
        t = time.monotonic()
        used, top, waited = self.cpu_by_role()
        row = {"t": round(t - self.started, 3), "cpu_s": {r: round(v, 4) for r, v in used.items()},
               "cpu_top_s": {r: round(v, 4) for r, v in top.items()},
               "wait_s": {r: round(v, 4) for r, v in waited.items()}}
        if (host := self.host_since()) is not None:
            row["host"] = host
        if self.nvml is not None and (gpu := self.nvml.sample()) is not None:
            row["gpu"] = gpu
        if self.urls and self.names and n % self.metrics_every == 0:
            text = "\n".join(conditions.scrape(u) for u in self.urls)
            # stamped when the answer came, not when the tick began: on a loaded host the /proc
            # reads and a busy engine's queue lie between the two, and rates divide by the time
            row["metrics_t"] = round(time.monotonic() - self.started, 3)
            row["metrics"] = series_values(text, self.names)
        self.ticks.append(row)

    def loop(self) -> None:
        n = 0
        while not self.stop_event.wait(self.interval_s):
            n += 1
            self.tick(n)

    def __enter__(self) -> "PointRecord":
        self.started = time.monotonic()
        self.tick(0)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_event.set()
        self.thread.join(timeout=10)
        self.tick(0)   # the last tick scrapes /metrics: every counter's end is kept

    def result(self, ticks: list[dict] | None = None) -> dict:
        ticks = self.ticks if ticks is None else ticks
        return {"interval_s": self.interval_s, "roles": sorted({r for t in ticks for r in t["cpu_s"]}),
                "gpu_count": len(self.nvml.handles) if self.nvml else 0, "ticks": ticks}

    def lap(self, span: list[float] | None = None) -> dict:
        """The record of one point of a process measuring point after point (an offline
        benchmark's runner): over `span` (its start and end on the monotonic clock) where
        given, the tick before it to the first after it; else since the last lap. Its times
        count from its first tick."""
        self.tick(0)   # now: a point shorter than a tick still has a first tick and a last
        if span is not None:
            at = [self.started + t["t"] for t in self.ticks]
            first = max([i for i, a in enumerate(at) if a <= span[0]], default=0)
            last = min([i for i, a in enumerate(at) if a >= span[1]], default=len(at) - 1)
            ticks = list(self.ticks[first:last + 1])
        else:
            ticks = list(self.ticks[self.lap_from:])
        self.lap_from = max(len(self.ticks) - 1, 0)
        t0 = ticks[0]["t"] if ticks else 0.0
        return self.result([{**t, "t": round(t["t"] - t0, 3)} for t in ticks])


def save(record: dict, path: Path) -> None:
    path.write_bytes(gzip.compress(json.dumps(record, separators=(",", ":")).encode(), mtime=0))
