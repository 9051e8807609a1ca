"""servelab prebuild-jit: which FlashInfer modules the run's vLLM starts would build, built
where those starts look. The build itself needs flashinfer and nvcc with CUDA's cuRAND
headers (on a GPU box); here the choice, the environment and the command's answers."""
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

from servelab.checks.validate import load_configs
from servelab.serve import jit_prebuild
from servelab.serve.launch import engine_cache_env

ROOT = Path(__file__).parents[2]


def course():
    return load_configs([str(ROOT / "config/config.yaml")])


def test_the_course_builds_the_sampler_and_the_trtllm_all_reduce_for_its_tensor_parallel_weeks():
    assert jit_prebuild.modules_for(course()) == ["sampling", "trtllm_comm"]


def test_no_tensor_parallel_start_under_trtllm_no_all_reduce_build():
    config = course()
    config["run"] = ["week01", "week05"]                       # one GPU each
    assert jit_prebuild.modules_for(config) == ["sampling"]
    config = course()
    del config["engines"]["vllm"]["env"]["VLLM_FLASHINFER_ALLREDUCE_BACKEND"]   # vLLM's auto: not trtllm
    assert jit_prebuild.modules_for(config) == ["sampling"]


def test_an_experiment_or_the_engine_turning_flashinfers_sampler_off_needs_no_sampling_build():
    config = course()
    config["run"] = ["week13"]
    config["experiments"]["week13"].setdefault("server", {})["env"] = {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
    assert jit_prebuild.modules_for(config) == ["trtllm_comm"]
    config = course()
    config["run"] = ["week01_sglang"]                           # SGLang builds its own
    assert jit_prebuild.modules_for(config) == []


def test_the_build_writes_into_the_flashinfer_workspace_a_session_of_this_config_uses(tmp_path):
    """The session's server env is engine_cache_env(...) then the engine's env
    (workflow/scripts/serve_session.py): the prebuild's must name the same workspace."""
    config = copy.deepcopy(course())
    config["paths"]["cache"] = str(tmp_path / "cache")
    env = jit_prebuild.build_env(config)
    session = {**engine_cache_env("vllm", config["paths"]["cache"], config["engines"]["vllm"]["env"]),
               **config["engines"]["vllm"]["env"]}
    assert env["FLASHINFER_WORKSPACE_BASE"] == session["FLASHINFER_WORKSPACE_BASE"]
    assert env["FLASHINFER_WORKSPACE_BASE"].startswith(str(tmp_path / "cache" / "vllm-"))
    assert env["VLLM_FLASHINFER_ALLREDUCE_BACKEND"] == "trtllm"


def test_without_flashinfer_where_vllm_runs_the_command_says_so_and_builds_nothing(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "servelab", "prebuild-jit", "config/config.yaml"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "flashinfer is not importable where vLLM runs here: nothing to build" in proc.stdout


def test_a_build_that_fails_is_reported_with_the_engine_pythons_own_words(tmp_path):
    """A Python where the generator's module is missing: the failure's last line comes back."""
    module, built, what = jit_prebuild.build_one("sampling", {"PATH": "/usr/bin:/bin", "PYTHONNOUSERSITE": "1"})
    assert (module, built) == ("sampling", False)
    assert "No module named 'flashinfer'" in what


def test_an_unknown_module_is_refused_by_name():
    proc = subprocess.run([sys.executable, "-m", "servelab", "prebuild-jit", "--module", "attention"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "invalid choice: 'attention'" in proc.stderr


def test_the_build_is_for_the_gpus_nvidia_smi_names_without_opening_cuda(tmp_path, monkeypatch):
    """A GPU cannot exist here: a stand-in nvidia-smi (named so) answers as four H100s do.
    The build then targets 9.0 (FlashInfer's 90a, as a start detecting an H100), without
    the CUDA context on GPU 0 that torch's detection would open beside the run's starts."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"   # STAND-IN for a GPU box's nvidia-smi
    fake.write_text('#!/bin/sh\ncase "$*" in *compute_cap*) printf "9.0\\n9.0\\n9.0\\n9.0\\n";; '
                    '*) printf "NVIDIA H100 80GB HBM3, 580.82.07\\n";; esac\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.delenv("FLASHINFER_CUDA_ARCH_LIST", raising=False)
    config = course()
    config["paths"]["cache"] = str(tmp_path / "cache")
    env = jit_prebuild.build_env(config)
    assert env["FLASHINFER_CUDA_ARCH_LIST"] == "9.0"
    assert "NVIDIA_H100_80GB_HBM3" in env["FLASHINFER_WORKSPACE_BASE"]   # the GPU's cache key
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", "10.0")               # a user's own choice stands
    assert jit_prebuild.build_env(config)["FLASHINFER_CUDA_ARCH_LIST"] == "10.0"


def test_with_no_nvidia_smi_no_architecture_is_named(monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")      # this box: no nvidia-smi
    monkeypatch.delenv("FLASHINFER_CUDA_ARCH_LIST", raising=False)
    assert "FLASHINFER_CUDA_ARCH_LIST" not in jit_prebuild.build_env(course())


def test_the_dag_step_runs_alone_and_records_what_it_built(tmp_path):
    """The rule of workflow/rules/serve.smk, run for real by Snakemake on the GPU check's
    config: it writes the marker every vLLM session waits on, saying what it built where.
    Here flashinfer is absent (vLLM's CPU build), so nothing is built and the run goes on."""
    configs = [str(ROOT / "config/config.yaml"), str(ROOT / "config/gpu-check.yaml")]
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path),
                           "--cores", "1", "--configfile", *configs, "--config", "gpus_here=1",
                           "gpu_here=NVIDIA H100 80GB HBM3", "--", ".cache/flashinfer-prebuilt/sampling.json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    marker = json.loads((tmp_path / ".cache/flashinfer-prebuilt/sampling.json").read_text())
    assert marker["ok"] is True
    assert marker["modules"] == {"sampling": "not built: flashinfer not importable"}
    assert marker["workspace"].startswith(str(tmp_path / ".cache" / "vllm-"))
    assert "flashinfer is not importable" in (tmp_path / "logs/prebuild_jit/sampling.log").read_text()


def test_a_session_builds_only_what_has_no_marker_and_leaves_one_per_module(tmp_path, monkeypatch):
    """What a session on one machine does before it claims a GPU (build_before_claim). Here
    flashinfer is absent: the modules are recorded as not built, as the DAG's job records them."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")      # no nvidia-smi: no architecture to name
    config = course()
    config["paths"]["cache"] = str(tmp_path / "cache")
    markers = {m: str(tmp_path / f"cache/flashinfer-prebuilt/{m}.json") for m in ("sampling", "trtllm_comm")}
    said = []
    assert jit_prebuild.build_before_claim(config, markers, progress=said.append) > 0
    for module, path in markers.items():
        marker = json.loads(Path(path).read_text())
        assert marker["ok"] is True and marker["modules"] == {module: "not built: flashinfer not importable"}
    assert any("flashinfer is not importable" in line for line in said)
    said.clear()
    assert jit_prebuild.build_before_claim(config, markers, progress=said.append) == 0.0 and said == []
