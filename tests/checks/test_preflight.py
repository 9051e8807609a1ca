"""Before any job: which experiments need a package the environment lacks, with the
command that installs it and the overlay that leaves it out (a package hidden from import)."""
import os
import subprocess
import sys

from conftest import REPO, make_workdir

from servelab.checks import preflight

# a finder that makes lm_eval unimportable, as on a GPU box without lm-eval
HIDE_LM_EVAL = """
import importlib.abc, sys
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "lm_eval" or name.startswith("lm_eval."):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)")
sys.meta_path.insert(0, Hide())
"""


def test_each_experiment_names_what_it_lacks_and_how_to_leave_it_out(course_config):
    lines = preflight.missing(course_config, ["week01", "week12", "study_phi4", "week15"],
                              has=lambda module, env: module not in ("lm_eval", "arctic_inference", "lmcache"))
    by_exp = {line.split(":")[0]: line for line in lines}
    assert set(by_exp) == {"week12", "study_phi4", "week15"}
    assert "lm_eval for eval (lm-eval) (pip install lm-eval==0.4.13)" in by_exp["week12"]
    assert "`experiments: {week12: {eval: null}}`" in by_exp["week12"]
    # only some named configurations need it: those can be left out by name
    assert "suffix16: null" in by_exp["study_phi4"] and "baseline" not in by_exp["study_phi4"]
    assert "without week15" in by_exp["week15"]


def test_experiments_that_aiperf_sends_are_named_where_no_aiperf_is_found(course_config):
    """Multi-turn conversations (a dataset) and the two-client check (a workload's
    `client_tool: aiperf`) need AIPerf, an executable of its own install target."""
    names = ["week01", "week06_multiturn", "workload_matrix_trace"]
    course_config["experiments"]["week01"]["client"]["workloads"] = {"second": {"args": {"client_tool": "aiperf"}}}
    lines = preflight.missing(course_config, names, has=lambda module, env: True, aiperf=lambda: False)
    assert {line.split(":")[0] for line in lines} == {"week01", "week06_multiturn"}   # a trace: vLLM's own client
    assert all("SERVELAB_AIPERF" in line and "without" in line for line in lines)
    assert preflight.missing(course_config, names, has=lambda module, env: True, aiperf=lambda: True) == []


def test_a_nulled_configuration_is_left_out(course_config):
    from snakemake.utils import update_config

    from servelab.checks.cross_checks import drop_nulled_sections

    update_config(course_config, {"experiments": {"study_phi4": {"server": {"configs": {"suffix16": None}}}}})
    drop_nulled_sections(course_config)
    assert "suffix16" not in course_config["experiments"]["study_phi4"]["server"]["configs"]
    assert "baseline" in course_config["experiments"]["study_phi4"]["server"]["configs"]


def test_the_dry_run_says_it_before_any_job_with_lm_eval_hidden(tmp_path):
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(HIDE_LM_EVAL)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hide), os.environ.get("PYTHONPATH", "")])}
    check = subprocess.run([sys.executable, "-c", "import importlib.util; print(importlib.util.find_spec('lm_eval'))"],
                           env=env, capture_output=True, text=True)
    assert "hidden by the test" in check.stderr       # the package is really out of reach
    module = subprocess.run([sys.executable, "-m", "servelab.checks.preflight", "config/config.yaml"],
                            cwd=REPO, env=env, capture_output=True, text=True)
    assert module.returncode == 1 and "week12: needs lm_eval" in module.stdout
    workdir = make_workdir(tmp_path / "w")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--config", "run=[week12]"],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "servelab pre-flight: week12: needs lm_eval" in proc.stderr
    assert "pip install lm-eval==0.4.13" in proc.stderr


def test_the_gpu_lock_installs_what_the_preflight_names_and_leaves_the_torch_alone():
    """envs/gpu-torch2.11-cu13.txt goes on top of a box's torch: it must not carry one (pip
    would replace the CUDA build), and it pins what the vLLM, eval and LMCache weeks import."""
    import re

    pins = dict(re.match(r"([A-Za-z0-9_.-]+)==(\S+)", line).groups()
                for line in (REPO / "envs/gpu-torch2.11-cu13.txt").read_text().splitlines()
                if line and not line.startswith("#"))
    assert not {"torch", "torchvision", "torchaudio", "triton"} & set(pins)
    assert pins["vllm"] == "0.26.0" and pins["lmcache"] == "0.5.6"
    assert f"lm-eval=={pins['lm-eval']}" in preflight.LM_EVAL.install


def test_a_package_every_process_would_compile_again_is_named_until_compiled(tmp_path, monkeypatch):
    """No bytecode and none written (PYTHONDONTWRITEBYTECODE, as on the lent GPU boxes):
    each engine process compiles the engine's source again. Compiled once, it is quiet."""
    import compileall

    package = tmp_path / "site" / "engine_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert preflight.uncompiled("engine_pkg") is None          # the first import writes it
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    line = preflight.uncompiled("engine_pkg")
    assert line and "engine_pkg at" in line and "PYTHONDONTWRITEBYTECODE is set" in line
    assert line.endswith(f"-m compileall -q {package}")
    assert compileall.compile_dir(str(package), quiet=1)      # what the line says to run
    assert preflight.uncompiled("engine_pkg") is None
    assert preflight.uncompiled("no_such_package_here") is None


def test_installed_engines_with_bytecode_raise_no_alarm():
    """The real set-up (pip compiles what it installs): nothing to say, also with
    PYTHONDONTWRITEBYTECODE=1; the engines' modules are looked up without importing them."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-m", "servelab.checks.preflight", "config/config.yaml", "config/local.yaml"],
                          cwd=REPO, env=env, capture_output=True, text=True)
    assert "experiment(s) need a package" in proc.stdout
    assert "no bytecode" not in proc.stdout
    assert preflight.slow_imports({"experiments": {"w": {"engine": "vllm", "kind": "serve"}}}, ["w"]) == []


def test_every_overlay_the_preflight_suggests_is_a_valid_config():
    """Each line's own remedy, applied as written, passes the schema and the cross-checks
    (week 12 without eval used to stop the dry run on its accuracy figure), and an experiment
    it says to leave out is no other's figure's baseline (which would bring it back)."""
    import copy
    import re

    import yaml
    from snakemake.utils import update_config, validate

    from conftest import load_config
    from servelab.checks import cross_checks

    course = load_config()
    names = list(course["experiments"])
    # a vLLM box with none of the course's other packages (transformers comes with vLLM)
    lacking = {"sglang", "sglang_router", "lm_eval", "lmcache", "nixl", "arctic_inference"}
    lines = preflight.missing(course, names, has=lambda module, env: module not in lacking)
    overlays = {line.split(":")[0] for line in lines if "with an overlay `" in line}
    assert overlays == {"week12", "study_phi4", "week15_multiturn"}      # a section; named configurations
    for line in lines:
        config = copy.deepcopy(course)
        name = line.split(":")[0]
        if m := re.search(r"with an overlay `(.+)`$", line):
            update_config(config, yaml.safe_load(m[1]))
        else:
            assert line.endswith(f"without {name})"), line
            config["run"] = [n for n in names if n != name]
            joins = [other for other in config["run"] for spec in (config["experiments"][other].get("figures") or {}).values()
                     if spec and name in spec.get("also_from", [])]
            assert not joins, f"{joins} join {name}: leaving it out of run would not leave it out"
        cross_checks.drop_nulled_sections(config)
        validate(config, str(REPO / "config/schema.yaml"))
        cross_checks.check(config)
