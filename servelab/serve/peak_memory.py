"""Peak memory of a point: the server tree's resident memory, and the GPUs' used memory.

A thread samples, every `interval_s` while a point is measured:
- the RSS of every process in the server's process groups (each server runs in its
  own group: servelab.serve.server), summed; pages shared between processes count once
  per process, so this is an upper bound of what the tree holds;
- where `nvidia-smi` exists, `memory.used` of the GPUs the server may use
  (CUDA_VISIBLE_DEVICES), summed: weights + KV cache + runtime buffers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

from servelab import machine

GIB = 1024 ** 3
PAGE = os.sysconf("SC_PAGE_SIZE")


def group_rss_bytes(pgids: set[int], proc: Path = Path("/proc")) -> int:
    """Summed resident memory of the live processes whose process group is in `pgids`."""
    total = 0
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) not in pgids or fields[0] == "Z":
                continue
            total += int((entry / "statm").read_text().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            continue  # the process ended while we looked
    return total


def parse_gpu_memory_mib(text: str) -> dict[int, float]:
    """{GPU index: MiB used} from `nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits`."""
    used = {}
    for line in text.strip().splitlines():
        index, _, mib = line.partition(",")
        try:
            used[int(index)] = float(mib)
        except ValueError:
            continue
    return used


class PeakMemory:
    """Context manager: the peak of the samples while it is open (`result()` in GiB)."""

    def __init__(self, pgids: list[int], env: dict | None = None, interval_s: float = 0.5):
        self.pgids = set(pgids)
        self.env = env if env is not None else dict(os.environ)
        self.interval_s = interval_s
        self.nvidia_smi = shutil.which("nvidia-smi", path=self.env.get("PATH"))
        self.peak_rss = 0
        self.peak_gpu_mib: float | None = None
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def sample(self) -> None:
        self.peak_rss = max(self.peak_rss, group_rss_bytes(self.pgids))
        if self.nvidia_smi:
            try:
                out = subprocess.run([self.nvidia_smi, "--query-gpu=index,memory.used",
                                      "--format=csv,noheader,nounits"], capture_output=True, text=True,
                                     timeout=10).stdout
            except (OSError, subprocess.TimeoutExpired):
                return
            visible = machine.visible_indices(self.env)
            used = sum(m for i, m in parse_gpu_memory_mib(out).items() if visible is None or i in visible)
            self.peak_gpu_mib = max(self.peak_gpu_mib or 0.0, used)

    def loop(self) -> None:
        while not self.stop_event.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> "PeakMemory":
        self.sample()
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_event.set()
        self.thread.join()
        self.sample()

    def reset(self) -> None:
        """Start the peaks afresh (the next point's own, of processes that outlive a point)."""
        self.peak_rss, self.peak_gpu_mib = 0, None
        self.sample()

    def result(self) -> dict:
        return {"peak_rss_gib": round(self.peak_rss / GIB, 4) if self.peak_rss else None,
                "peak_gpu_mem_gib": round(self.peak_gpu_mib / 1024, 4) if self.peak_gpu_mib is not None else None}
