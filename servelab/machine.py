"""What this machine has: its GPUs as nvidia-smi lists them (those CUDA_VISIBLE_DEVICES
leaves visible), and its memory. Asked without touching CUDA, so that a plan, a box's fit or
a record of the hardware never takes a GPU context."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def nvidia_smi_rows(fields: str, csv_format: str = "csv,noheader") -> list[str]:
    """One line per GPU of `nvidia-smi --query-gpu=FIELDS`; empty where there is none.
    Asked without touching CUDA (no context on any GPU)."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", f"--format={csv_format}"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def visible_gpus(env: dict | None = None) -> list[tuple[str, int]]:
    """(name, memory.total MiB) of each GPU nvidia-smi lists here that CUDA_VISIBLE_DEVICES
    (of `env`, else this process's) leaves visible, by index or UUID; empty without one."""
    rows = [[f.strip() for f in line.split(",")] for line in
            nvidia_smi_rows("index,uuid,name,memory.total", "csv,noheader,nounits") if line.count(",") >= 3]
    visible = (env if env is not None and "CUDA_VISIBLE_DEVICES" in env else os.environ).get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        wanted = [v.strip() for v in str(visible).split(",") if v.strip()]
        rows = [r for r in rows if r[0] in wanted or r[1] in wanted]
    return [(",".join(r[2:-1]), int(float(r[-1]))) for r in rows]


def machine_gpus(env: dict) -> list[str]:
    """The GPU ids this machine lets us use: CUDA_VISIBLE_DEVICES's if set, else the index of
    every GPU nvidia-smi lists."""
    if env.get("CUDA_VISIBLE_DEVICES"):
        return [d.strip() for d in env["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]
    return nvidia_smi_rows("index")


def visible_indices(env: dict) -> set[int] | None:
    """The GPU indices a process with this environment may use (None: all, or named by UUID)."""
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    ids = [v.strip() for v in value.split(",") if v.strip()]
    return {int(v) for v in ids} if all(v.isdigit() for v in ids) else None


def host_memory_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 2 ** 20
    raise OSError("no MemTotal in /proc/meminfo")
