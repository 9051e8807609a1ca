"""JIT modules built before a GPU is claimed (servelab.serve.jit_builds): which ones the run's
starts would build (each engine's face says), the DAG's job and a session's own build, and
`servelab prebuild-jit`. The build itself needs flashinfer and nvcc with CUDA's cuRAND headers
(on a GPU box); here the choice, the markers and the command's answers."""
import json
import subprocess
import sys
from pathlib import Path

from servelab.checks.validate import load_configs
from servelab.serve import jit_builds

ROOT = Path(__file__).parents[2]


def course():
    return load_configs([str(ROOT / "config/config.yaml")])


def test_the_course_builds_the_sampler_and_the_trtllm_all_reduce_for_its_tensor_parallel_weeks():
    assert jit_builds.modules_for(course()) == {"vllm": ["sampling", "trtllm_comm"]}


def test_no_tensor_parallel_start_under_trtllm_no_all_reduce_build():
    config = course()
    config["run"] = ["week01", "week05"]                       # one GPU each
    assert jit_builds.modules_for(config) == {"vllm": ["sampling"]}
    config = course()
    del config["engines"]["vllm"]["env"]["VLLM_FLASHINFER_ALLREDUCE_BACKEND"]   # vLLM's auto: not trtllm
    assert jit_builds.modules_for(config) == {"vllm": ["sampling"]}


def test_an_experiment_or_the_engine_turning_flashinfers_sampler_off_needs_no_sampling_build():
    config = course()
    config["run"] = ["week13"]
    config["experiments"]["week13"].setdefault("server", {})["env"] = {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
    assert jit_builds.modules_for(config) == {"vllm": ["trtllm_comm"]}
    config = course()
    config["run"] = ["week01_sglang"]                           # SGLang builds its own
    assert jit_builds.modules_for(config) == {}


def test_without_flashinfer_where_vllm_runs_the_command_says_so_and_builds_nothing(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "servelab", "prebuild-jit", "config/config.yaml"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "flashinfer is not importable where vLLM runs here: nothing to build" in proc.stdout


def test_an_unknown_module_is_refused_by_name():
    proc = subprocess.run([sys.executable, "-m", "servelab", "prebuild-jit", "--module", "attention"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "invalid choice: 'attention'" in proc.stderr


def test_the_dag_step_runs_alone_and_records_what_it_built(tmp_path):
    """The rule of workflow/rules/serve.smk, run for real by Snakemake on the GPU check's
    config: it writes the marker every vLLM session waits on, saying what it built where.
    Here flashinfer is absent (vLLM's CPU build), so nothing is built and the run goes on."""
    configs = [str(ROOT / "config/config.yaml"), str(ROOT / "config/gpu-check.yaml")]
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path),
                           "--cores", "1", "--configfile", *configs, "--config", "gpus_here=1",
                           "gpu_here=NVIDIA H100 80GB HBM3", "--", ".cache/jit-prebuilt/vllm/sampling.json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    marker = json.loads((tmp_path / ".cache/jit-prebuilt/vllm/sampling.json").read_text())
    assert marker["ok"] is True
    assert marker["modules"] == {"sampling": "not built: flashinfer not importable"}
    assert marker["workspace"].startswith(str(tmp_path / ".cache" / "vllm-"))
    assert "flashinfer is not importable" in (tmp_path / "logs/prebuild_jit/vllm/sampling.log").read_text()


def test_a_session_builds_only_what_has_no_marker_and_leaves_one_per_module(tmp_path, monkeypatch):
    """What a session on one machine does before it claims a GPU (build_before_claim). Here
    flashinfer is absent: the modules are recorded as not built, as the DAG's job records them."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")      # no nvidia-smi: no architecture to name
    config = course()
    config["paths"]["cache"] = str(tmp_path / "cache")
    markers = {m: str(tmp_path / f"cache/jit-prebuilt/vllm/{m}.json") for m in ("sampling", "trtllm_comm")}
    said = []
    assert jit_builds.build_before_claim("vllm", config, markers, progress=said.append) > 0
    for module, path in markers.items():
        marker = json.loads(Path(path).read_text())
        assert marker["ok"] is True and marker["modules"] == {module: "not built: flashinfer not importable"}
    assert any("flashinfer is not importable" in line for line in said)
    said.clear()
    assert jit_builds.build_before_claim("vllm", config, markers, progress=said.append) == 0.0 and said == []

