"""vLLM's FlashInfer JIT modules built with no GPU held (servelab.engines.vllm.jit_prebuild):
built where vLLM's starts look, for the GPUs the box has, and a failed build's own words."""
import copy
import os
from pathlib import Path

from servelab.checks.validate import load_configs
from servelab.engines.environment import engine_cache_env
from servelab.engines.vllm import jit_prebuild

ROOT = Path(__file__).parents[2]


def course():
    return load_configs([str(ROOT / "config/config.yaml")])


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


def test_a_build_that_fails_is_reported_with_the_engine_pythons_own_words(tmp_path):
    """A Python where the generator's module is missing: the failure's last line comes back."""
    module, built, what = jit_prebuild.build_one("sampling", {"PATH": "/usr/bin:/bin", "PYTHONNOUSERSITE": "1"})
    assert (module, built) == ("sampling", False)
    assert "No module named 'flashinfer'" in what


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
