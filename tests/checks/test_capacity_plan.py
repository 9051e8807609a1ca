"""`servelab plan`: every server point of a run against a GPU's memory, exit 1 naming each
point that cannot fit (servelab/checks/capacity_plan.py)."""
import subprocess
import sys

import yaml

from conftest import REPO

H100 = ["--gpu", "NVIDIA H100 80GB HBM3"]


def plan(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "servelab.cli", "plan", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def test_the_gpu_check_on_one_h100_fits_and_week13_and_14_say_why_not(tmp_path):
    ok = plan("config/config.yaml", "config/gpu-check.yaml", *H100, "--gpus", "1")
    assert ok.returncode == 0, ok.stderr
    assert "week01 [base] vllm, 1 GPU(s) of NVIDIA H100 80GB HBM3 (79.6 GiB): weights 14.96 GiB/GPU" in ok.stdout
    # the check runs what fits: what one GPU cannot run is left out by name, not refused
    assert "left out (run_what_fits): week14: needs 2 GPUs, 1 here" in ok.stdout
    assert "left out (run_what_fits): week13 [tensor_parallel_size=4]: needs 4 GPUs, 1 here" in ok.stdout
    overlay = tmp_path / "run.yaml"
    overlay.write_text(yaml.safe_dump({"run": ["week13", "week14", "week01"], "run_what_fits": False}))
    one = plan("config/config.yaml", "config/gpu-check.yaml", str(overlay), *H100, "--gpus", "1")
    assert one.returncode == 1
    refused = [line for line in one.stderr.splitlines() if "cannot fit" in line]
    assert "week13 [tensor_parallel_size=2]: needs 2 GPUs, 1 here" in one.stderr
    assert "week13 [tensor_parallel_size=4]: needs 4 GPUs, 1 here" in one.stderr
    assert len(refused) == 4, refused     # TP 2, TP 4, week14's two points (TP 2 each)
    four = plan("config/config.yaml", "config/gpu-check.yaml", str(overlay), *H100, "--gpus", "4")
    assert four.returncode == 0, four.stderr
    assert "week14 [enable_expert_parallel=true] vllm, 2 GPU(s)" in four.stdout and "weights 43.5 GiB/GPU" in four.stdout


def test_week14_at_tp1_on_one_80gb_gpu_is_refused(tmp_path):
    overlay = tmp_path / "tp1.yaml"
    overlay.write_text(yaml.safe_dump({"run": ["week14"], "run_what_fits": False, "experiments": {"week14": {
        "server": {"args": {"tensor_parallel_size": 1}}}}}))
    out = plan("config/config.yaml", "config/gpu-check.yaml", str(overlay), *H100)
    assert out.returncode == 1
    assert "week14 [enable_expert_parallel=false]: no memory for the KV cache: gpu_memory_utilization 0.9 x " \
           "NVIDIA H100 80GB HBM3 (79.6 GiB) = 71.7 GiB, less weights 86.99 GiB per GPU" in out.stderr
    # the check as it ships runs what fits: here nothing, which it says and exits 1 on
    overlay.write_text(yaml.safe_dump({"run": ["week14"], "experiments": {"week14": {"server": {
        "args": {"tensor_parallel_size": 1}}}}}))
    fitted = plan("config/config.yaml", "config/gpu-check.yaml", str(overlay), *H100)
    assert fitted.returncode == 1 and "Traceback" not in fitted.stderr
    assert "left out (run_what_fits): week14: does not fit one NVIDIA H100 80GB HBM3: no memory for the KV cache" \
        in fitted.stdout
    assert "run_what_fits: this box runs none of the experiments" in fitted.stderr


def test_the_cpu_default_plans_against_this_hosts_memory():
    out = plan("config/config.yaml", "config/local.yaml")
    assert out.returncode == 0, out.stderr
    assert "week01 [base] vllm, 0 GPU(s) of host memory (" in out.stdout and ": fits" in out.stdout


def test_no_gpu_named_and_none_here_is_a_clear_error():
    out = plan("config/config.yaml", "config/gpu-check.yaml")
    assert out.returncode != 0 and "which GPU? No nvidia-smi here: give --gpu" in out.stderr
    unknown = plan("config/config.yaml", "config/gpu-check.yaml", "--gpu", "NVIDIA B300")
    assert unknown.returncode != 0 and "'NVIDIA B300' is not in resources/gpus.yaml" in unknown.stderr
