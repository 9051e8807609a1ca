"""What makes a number reproducible: versions, hardware, commit."""

from __future__ import annotations

import importlib.metadata as metadata
import platform
import shutil
import subprocess
from pathlib import Path


def package_version(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_models() -> list[str]:
    """GPU names and driver from nvidia-smi; empty where there is none."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def hardware() -> dict:
    return {"cpu": cpu_model(), "gpus": gpu_models()}


def git_commit(repo: str | Path) -> str | None:
    try:
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
    except (subprocess.SubprocessError, OSError):
        return None


# what the scheduler gave the job: the GPUs it may use, and where it ran
JOB_ENV_VARS = ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID", "SLURM_JOB_PARTITION", "SLURM_JOB_GPUS",
                "SLURM_JOB_NODELIST", "SLURM_CPUS_ON_NODE")


def job_environment() -> dict:
    import os

    return {k: os.environ[k] for k in JOB_ENV_VARS if k in os.environ}
