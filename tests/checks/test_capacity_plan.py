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


def row(stdout: str, experiment: str, point: str) -> list[str]:
    """The cells of the plan table's row of one server point."""
    (found,) = [line.split() for line in stdout.splitlines() if line.split()[:2] == [experiment, point]]
    return found


def test_the_gpu_check_on_one_h100_fits_and_week13_and_14_say_why_not(tmp_path):
    ok = plan("config/config.yaml", "config/gpu-check.yaml", *H100, "--gpus", "1")
    assert ok.returncode == 0, ok.stderr
    assert "each server point against NVIDIA H100 80GB HBM3 (79.6 GiB a GPU):" in ok.stdout
    assert row(ok.stdout, "week01", "base")[2:5] == ["vllm", "1", "14.96"], ok.stdout
    # a table: a header, then one line per point, aligned (no line of 300 characters)
    assert max(len(line) for line in ok.stdout.splitlines()) < 200
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
    assert row(four.stdout, "week14", "enable_expert_parallel=true")[2:5] == ["vllm", "2", "43.5"], four.stdout


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
    assert "each server point against host memory (" in out.stdout
    week01 = row(out.stdout, "week01", "base")
    assert week01[2:4] == ["vllm", "0"] and week01[-1] == "yes", out.stdout


def test_no_gpu_named_and_none_here_is_a_clear_error():
    out = plan("config/config.yaml", "config/gpu-check.yaml")
    assert out.returncode != 0 and "which GPU? No nvidia-smi here: give --gpu" in out.stderr
    unknown = plan("config/config.yaml", "config/gpu-check.yaml", "--gpu", "NVIDIA B300")
    assert unknown.returncode != 0 and "'NVIDIA B300' is not in resources/gpus.yaml" in unknown.stderr


def test_servers_kept_up_together_in_rounds_must_fit_one_gpu_together():
    """config/studies/rounds-gpu.yaml: five servers of Phi-4-mini's shape, each with an L4's
    KV cache, up at once in interleaved rounds: 101 GiB by the plan (112 GiB at their recorded
    peaks on an H200, tests/data/recorded_gpu/h200_20261207_rounds). Each fits an 80 GB GPU
    alone; together only the H200."""
    configs = ["config/config.yaml", "config/studies/phi4-steady-gpu.yaml", "config/studies/rounds-gpu.yaml"]
    h200 = plan(*configs, "--gpu", "NVIDIA H200", "--gpus", "1")
    assert h200.returncode == 0, h200.stderr
    assert "study_phi4_rounds_l4kv in rounds: its 5 servers up at once hold 101.1 GiB of 140.4 GiB: fit together" \
        in h200.stdout
    assert "5 of 5 server point(s) fit" in h200.stdout
    # what a pass holds the GPU for: 5 points a round of 12 s sent + 3 s of grace, 5 warm-ups of 5 s
    assert "a round sends 5 points for 75 s in all (duration_s plus grace_s): 3 rounds hold the GPU at least " \
        "4.2 minutes, 6 rounds 7.9 (warm-ups included), beside the servers' start" in h200.stdout
    h100 = plan(*configs, *H100, "--gpus", "1")
    assert h100.returncode == 1 and "5 of 5 server point(s) fit" in h100.stdout
    refused = [line for line in h100.stderr.splitlines() if "cannot fit" in line]
    assert len(refused) == 1 and "study_phi4_rounds_l4kv in rounds: 4 of the 5 servers, held at once in their start " \
        "order, take seqs128_fp8kv 20.22 + seqs256_fp8kv 20.22 + baseline_twin 20.22 + seqs128 20.22 = 80.9 GiB: " \
        "over the GPU's 79.6 GiB" in refused[0]
    assert "measure the configurations in sequence" in refused[0]
    # the part an 80 GB GPU holds (config/studies/rounds-gpu-80gb.yaml): three servers
    part = plan("config/config.yaml", "config/studies/phi4-steady-gpu.yaml", "config/studies/rounds-gpu-80gb.yaml",
                *H100, "--gpus", "1")
    assert part.returncode == 0, part.stderr
    assert "study_phi4_rounds_l4kv_80gb in rounds: its 3 servers up at once hold 60.7 GiB of 79.6 GiB: fit " \
        "together; a round sends 3 points for 45 s" in part.stdout


def test_a_server_started_after_others_must_find_its_share_free():
    """vLLM asks at its start to find its share (gpu_memory_utilization) free; with
    kv_cache_memory_bytes it then holds weights + that KV cache, whatever the share. So the
    order the servers start in (the rounds' first order) decides: a large share started last
    finds the others' memory taken."""
    from servelab.fetch.capacity import PointPlan, together

    def server(held, start):
        return PointPlan(memory="GPU", gpus=1, weights_gib=7.15, kv_bytes_per_token=1, kv_cache_gib=1, kv_cache_tokens=1,
                         max_model_len=1, sequences=1, fits=True, held_gib=held, start_gib=start)

    plans = {"large_share": server(9.5, 47.8), "large_kv": server(45.0, 27.9)}
    assert together(plans, 79.6, ["large_share", "large_kv"]) is None
    why = together(plans, 79.6, ["large_kv", "large_share"])
    assert why == ("large_share, started after large_kv (45.0 GiB held), asks at its start for its share 47.8 GiB "
                   "free: 34.6 GiB of the GPU's 79.6 GiB are")
    assert "2 of the 2 servers, held at once in their start order, take a 50.5 + b 50.5 = 101.0 GiB: over" in \
        together({"a": server(50.5, 10), "b": server(50.5, 10)}, 79.6, ["a", "b"])


def test_shares_summing_over_095_are_refused_before_any_start(tmp_path):
    overlay = tmp_path / "shares.yaml"
    overlay.write_text(yaml.safe_dump({"experiments": {"study_phi4_rounds_l4kv": {
        "server": {"args": {"gpu_memory_utilization": 0.3}}}}}))
    got = plan("config/config.yaml", "config/studies/phi4-steady-gpu.yaml", "config/studies/rounds-gpu.yaml",
               str(overlay), "--gpu", "NVIDIA H200", "--gpus", "1")
    assert got.returncode == 1, got.stdout
    assert "summing to at most 0.95 (now [0.3, 0.3, 0.3, 0.3, 0.3])" in got.stderr
