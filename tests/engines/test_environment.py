"""An engine installed apart from the job's Python (engines.<name>.env PYTHONPATH): the
pre-flight, the engine's version and its processes look it up there (a real directory
of packages, as `pip install --target` leaves it)."""
import json

from servelab.checks import preflight
from servelab.engines import environment
from servelab.engines.sglang.engine import SGLangBenchClient


def package_dir(root, name: str, version: str):
    """A package as `pip install --target` leaves it: its module and its dist-info."""
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(f"VERSION = {version!r}\n")
    meta = root / f"{name}-{version}.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return root


def test_a_module_and_its_version_are_found_on_the_engines_path_only(tmp_path):
    site = package_dir(tmp_path / "site", "servelab_probe_engine", "0.5.17")
    env = {"PYTHONPATH": str(site)}
    assert environment.engine_paths(env) == [str(site)]
    assert environment.importable("servelab_probe_engine", env)
    assert not environment.importable("servelab_probe_engine")
    assert environment.installed_version(("servelab_probe_engine",), env) == "0.5.17"
    assert environment.installed_version(("servelab_probe_engine",)) is None
    # the job's own packages are still seen behind it
    assert environment.importable("yaml", env)


def test_preflight_looks_where_the_experiments_engine_will(course_config, tmp_path):
    # week 15 needs lmcache (not installed here) in vLLM's processes
    assert any(line.startswith("week15:") for line in preflight.missing(course_config, ["week15"]))
    site = package_dir(tmp_path / "vllm-site", "lmcache", "0.5.6")
    course_config["engines"]["vllm"]["env"] = {"PYTHONPATH": str(site)}
    assert preflight.missing(course_config, ["week15"]) == []
    # another engine's path is not this one's
    course_config["engines"]["vllm"]["env"] = {}
    course_config["engines"]["sglang"]["env"] = {"PYTHONPATH": str(site)}
    assert any(line.startswith("week15:") for line in preflight.missing(course_config, ["week15"]))


def test_sglangs_client_runs_in_the_engines_environment_offline(tmp_path):
    # what the child process sees: the env given, not the job's (the lent box's vLLM target),
    # and the hub off (its retries on the served name cost 65-70 s a point on a lent H100)
    out = tmp_path / "bench.log"
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "sglang").mkdir()
    (probe / "sglang" / "__init__.py").write_text("")
    (probe / "sglang" / "bench_serving.py").write_text(
        "import os, sys, json; print(json.dumps({'pythonpath': os.environ.get('PYTHONPATH'), "
        "'offline': os.environ.get('HF_HUB_OFFLINE'), 'argv': sys.argv[1:]}))\n")
    SGLangBenchClient({"PYTHONPATH": str(probe), "PATH": "/usr/bin:/bin"}).run(["--num-prompts", "4"], out)
    seen = json.loads(out.read_text().splitlines()[-1])
    assert seen == {"pythonpath": str(probe), "offline": "1", "argv": ["--num-prompts", "4"]}
