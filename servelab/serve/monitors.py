"""What watches a session besides the benchmark client (weeks 2, 3, 10):

- `metrics`: a thread scraping the server's Prometheus /metrics into a CSV timeline
  (running/waiting requests, KV cache usage, token counters...);
- `gpu`: `nvidia-smi` in loop mode into a CSV (utilization, memory, power);
- `torch_profile`: vLLM's torch profiler (`--profiler-config`) around every
  client point (`vllm bench serve --profile`), traces in the session directory;
- `wrap`: the server (or offline benchmark) command run under `nsys profile` or
  `ncu`, reports in the session directory.

An experiment's `monitors` are part of each point's identity: a profiled run is
not the same measurement as a plain one.
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import threading
import time
from pathlib import Path

import requests

from servelab.engines.registry import ENGINES

# gauges and counters of the engines' /metrics worth a timeline (prefix match; each engine's face
# declares its own)
METRIC_PREFIXES = tuple(series for e in ENGINES.values() for series in e.sampled_metrics)
GPU_FIELDS = ("timestamp", "index", "name", "utilization.gpu", "utilization.memory", "memory.used",
              "memory.total", "power.draw")


def parse_prometheus(text: str, prefixes=METRIC_PREFIXES) -> list[tuple[str, str, float]]:
    """(metric, labels, value) of the sample lines whose name starts with a prefix."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#") or not line.startswith(prefixes):
            continue
        head, _, value = line.rpartition(" ")
        name, _, labels = head.partition("{")
        try:
            out.append((name, labels.rstrip("}"), float(value)))
        except ValueError:
            continue
    return out


class MetricsScraper:
    """GET {url} every `interval_s` in a thread; rows (t_s, metric, labels, value)."""

    def __init__(self, url: str, out: Path, interval_s: float = 1.0):
        self.url, self.out, self.interval_s = url, Path(out), interval_s
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.samples = 0

    def loop(self) -> None:
        started = time.monotonic()
        with open(self.out, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["t_s", "metric", "labels", "value"])
            while not self.stop_event.is_set():
                try:
                    text = requests.get(self.url, timeout=2).text
                except requests.RequestException:
                    text = ""  # a busy or restarting server: skip this tick
                t = round(time.monotonic() - started, 3)
                for name, labels, value in parse_prometheus(text):
                    writer.writerow([t, name, labels, value])
                self.samples += 1
                fh.flush()
                self.stop_event.wait(self.interval_s)

    def __enter__(self) -> "MetricsScraper":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_event.set()
        self.thread.join(timeout=10)


class GpuMonitor:
    """`nvidia-smi --query-gpu=... -lms N` writing CSV, for the session's lifetime."""

    def __init__(self, out: Path, interval_ms: int = 500, env: dict | None = None):
        self.out, self.interval_ms, self.env = Path(out), interval_ms, env
        self.proc: subprocess.Popen | None = None

    def command(self) -> list[str]:
        return ["nvidia-smi", f"--query-gpu={','.join(GPU_FIELDS)}", "--format=csv,nounits",
                f"-lms={self.interval_ms}"]

    def __enter__(self) -> "GpuMonitor":
        if shutil.which("nvidia-smi", path=(self.env or {}).get("PATH")) is None:
            raise RuntimeError("monitors.gpu needs nvidia-smi on PATH (a GPU node); remove it on a CPU machine")
        self.fh = open(self.out, "w")
        self.proc = subprocess.Popen(self.command(), stdout=self.fh, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env, start_new_session=True)
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.fh.close()


def wrap_command(cmd: list[str], wrap: dict | None, out_dir: Path) -> list[str]:
    """The command under nsys or ncu, its report in out_dir; unchanged without `wrap`."""
    from servelab.engines.commands import to_flags

    if not wrap:
        return cmd
    extra = to_flags(wrap.get("args", {}), false_flags=False)
    if wrap["tool"] == "nsys":
        return ["nsys", "profile", "--output", str(out_dir / "nsys-%p"), "--force-overwrite", "true",
                *extra, *cmd]
    return ["ncu", "--target-processes", "all", "--export", str(out_dir / "ncu"), "--force-overwrite",
            *extra, *cmd]


def profiler_knobs(monitors: dict, out_dir: Path) -> dict:
    """vLLM server knobs that turn its torch profiler on (traces under out_dir)."""
    if "torch_profile" not in monitors:
        return {}
    return {"profiler_config": {"profiler": "torch", "torch_profiler_dir": str(out_dir / "torch_profile"),
                                **monitors["torch_profile"]}}
