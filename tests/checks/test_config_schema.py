"""A bad key or value stops the run before any job, and the message names it."""
import copy

import pytest
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from conftest import REPO, make_workdir, snakemake
from servelab.checks.cross_checks import ConfigError, check

SCHEMA = str(REPO / "config/schema.yaml")

from conftest import validated  # noqa: E402


def test_shipped_configs_are_valid(course_config, local_config):
    validated(course_config)
    validated(local_config)


def test_schema_fills_defaults(local_config):
    del local_config["paths"]
    local_config["experiments"]["week01"].pop("figures")
    config = validated(local_config)
    assert config["paths"]["models"] == "resources/models"
    assert config["experiments"]["week01"]["figures"] == {}


@pytest.mark.parametrize("mutate, named", [
    (lambda c: c["experiments"]["week01"].update(rate=[1]), "'rate' was unexpected"),
    (lambda c: c["experiments"]["week01"]["client"]["grid"].update(request_rate=[1, -2]), "-2"),
    (lambda c: c["experiments"]["week01"]["client"]["grid"].update(request_rate=["fast"]), "'fast'"),
    (lambda c: c["experiments"]["week01"]["client"]["args"].update(num_prompts=0), "0"),
    (lambda c: c["experiments"]["week01"]["server"]["args"].update({"Max-Num-Seqs": 4}), "Max-Num-Seqs"),
    (lambda c: c["models"]["tiny_llama"]["tiny"].update(vocab_size=5000), "5000"),
    (lambda c: c["models"]["llama31_8b"].update(revision="main"), "'main'"),
    (lambda c: c["experiments"]["week01"].update(engine="tgi"), "'tgi'"),
    (lambda c: c["experiments"]["study_phi4"]["server"]["configs"].update({"fp8-kv": {}}), "fp8-kv"),
    (lambda c: c["experiments"]["workload_matrix_cpu"]["client"]["workloads"]["short_short"].update(
        rate=[1]), "'rate' was unexpected"),
    (lambda c: c.update(retry_failed="sometimes"), "'sometimes'"),
    # a configuration's name is a name (never a grid point's `knob=value`): they cannot collide
    (lambda c: c["experiments"]["week04"]["server"].update(configs={"max_num_seqs=8": {}}), "'max_num_seqs=8'"),
    (lambda c: c["experiments"]["study_search_cpu"]["search"]["load"].update(knob="num_prompts"), "'num_prompts'"),
    (lambda c: c["experiments"]["study_search_cpu"]["search"].update(strategy="bayes"), "'bayes'"),
    (lambda c: c["experiments"]["study_search_cpu"]["search"]["space"].update(max_num_seqs=[0, 4]), "0"),
    (lambda c: c["experiments"]["study_search_cpu"]["search"].update(budget={"session_s": 0}), "0"),
    (lambda c: c["experiments"]["study_search_cpu"]["search"].update(budget={"wall_h": 2}), "'wall_h'"),
])
def test_schema_rejects_bad_values_by_name(local_config, mutate, named):
    mutate(local_config)
    with pytest.raises(WorkflowError) as err:
        validated(local_config)
    assert named in str(err.value)


@pytest.mark.parametrize("mutate, named", [
    (lambda c: c["experiments"]["week01"].update(model="llama99"), "experiments.week01.model: 'llama99'"),
    (lambda c: c["experiments"]["week01"].update(dataset="nope"), "experiments.week01.dataset: 'nope'"),
    (lambda c: c.update(run=["week99"]), "run: unknown experiment 'week99'"),
    (lambda c: c["experiments"]["week01"]["figures"]["ttft_vs_rate"].update(y="ttft_p42_ms"),
     "experiments.week01.figures.ttft_vs_rate.y: unknown column 'ttft_p42_ms'"),
    (lambda c: c["experiments"]["week01"]["client"]["args"].update(request_rate=4),
     "experiments.week01.client: knob(s) ['request_rate'] are both fixed in args and swept in grid"),
    # vllm bench throughput silently ignores --input-len on the random dataset (measured)
    (lambda c: c["experiments"]["week07"]["client"]["args"].update(input_len=64),
     "experiments.week07.client.input_len: vllm bench throughput ignores it on the random dataset"),
    (lambda c: c["experiments"]["week07"]["figures"]["static_vs_continuous"].update(also_from=["week77"]),
     "experiments.week07.figures.static_vs_continuous.also_from: unknown experiment 'week77'"),
    (lambda c: c["experiments"]["week07_static"].update(tool="throughput"),
     "experiments.week07_static: kind offline with engine transformers needs tool one of ['static_batch']"),
    (lambda c: c["experiments"]["week03"].update(eval={"tasks": ["gsm8k"]}),
     "experiments.week03.eval: lm-eval runs against a server; kind offline has none"),
    (lambda c: c["experiments"]["week12"]["eval"].update(tasks=["gsm8k"]),
     "experiments.week12.eval.generated_task: 'gsm8k_arith' is not among eval.tasks"),
    (lambda c: c["experiments"]["week12"]["figures"]["pareto"].update(size="weights_gb"),
     "experiments.week12.figures.pareto.size: unknown column 'weights_gb'"),
    # a search chooses its own points, within its space and load range
    (lambda c: c["experiments"]["study_search_cpu"]["server"].update(grid={"block_size": [16, 32]}),
     "experiments.study_search_cpu.search: a search chooses its own points; remove server.grid"),
    (lambda c: c["experiments"]["study_search_cpu"]["search"].update(start={"max_num_seqs": 3}),
     "experiments.study_search_cpu.search.start.max_num_seqs: 3 is not among the space's values"),
    (lambda c: c["experiments"]["study_search_cpu"]["search"]["load"].update(low=128),
     "experiments.study_search_cpu.search.load: low (128) must be below high (64)"),
    (lambda c: c["experiments"]["study_search_cpu"]["client"]["args"].update(max_concurrency=4),
     "experiments.study_search_cpu.search.load.knob: max_concurrency is also fixed in client.args"),
    (lambda c: c["experiments"]["study_search_cpu"]["search"]["slo"].update(p95_ttft_ms=100),
     "experiments.study_search_cpu.search.slo: 'p95_ttft_ms' is not a limit servelab knows"),
    (lambda c: c["experiments"]["study_search_cpu"].update(repeats=3),
     "experiments.study_search_cpu.search: each load step is measured once; set repeats: 1"),
    (lambda c: c["experiments"]["study_search_cpu"]["search"].update(strategy="grid", budget={"session_s": 600}),
     "experiments.study_search_cpu.search.budget.session_s: a grid is one round and has no later round to cut"),
    # a point sized in time holds a rate or a concurrency; an offline benchmark holds neither
    (lambda c: c["experiments"]["week01"]["client"]["args"].update(duration_s=30),
     "experiments.week01.client.duration_s: needs a request_rate or a max_concurrency"),
    (lambda c: c["experiments"]["week02_throughput"]["client"]["args"].update(duration_s=30),
     "experiments.week02_throughput.client.duration_s: a duration sizes a served load; kind offline has none"),
])
def test_cross_references_are_checked_by_name(local_config, mutate, named):
    mutate(local_config)
    with pytest.raises(ConfigError) as err:
        validated(local_config)
    assert named in str(err.value)


def test_snakemake_stops_before_any_job_on_a_bad_key(tmp_path):
    work = make_workdir(tmp_path / "wf")
    (work / "bad.yaml").write_text(yaml.safe_dump(
        {"experiments": {"week01": {"client": {"args": {"num_prompts": 10}}, "typo_knob": 1}}}))
    proc = snakemake(work, "--profile", "profiles/local", "--configfile", "config/config.yaml",
                     "config/local.yaml", "bad.yaml", "-n", check=False)
    assert proc.returncode != 0
    assert "experiments.week01: unknown key 'typo_knob'" in proc.stderr + proc.stdout
    assert not (work / "results").exists() and not (work / "resources/models").exists()


def test_an_overlay_switches_a_section_off_with_null(course_config):
    from servelab.checks import cross_checks

    week12 = course_config["experiments"]["week12"]
    week12["eval"] = None
    # where lm-eval is missing the pre-flight suggests this: a valid config, the accuracy
    # figure left out with the accuracy (test below), or named off explicitly
    check(cross_checks.drop_nulled_sections(copy.deepcopy(course_config)))
    week12["figures"]["pareto"] = None
    cross_checks.drop_nulled_sections(course_config)
    assert "eval" not in week12 and list(week12["figures"]) == ["throughput_by_precision"]
    cross_checks.check(course_config)


def test_retry_failed_from_the_command_line_is_a_boolean(local_config):
    from servelab.checks.cross_checks import drop_nulled_sections

    for given, wanted in (("true", True), ("True", True), (True, True), ("false", False)):
        assert validated(drop_nulled_sections(dict(local_config, retry_failed=given)))["retry_failed"] is wanted


def test_a_yaml_syntax_error_is_named_with_file_and_line(tmp_path, capsys):
    from servelab.checks.validate import main

    bad = tmp_path / "my-study.yaml"
    bad.write_text("experiments:\n  week01:\n    client: {args: {num_prompts: 3}\n")
    assert main([str(REPO / "config/config.yaml"), str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad} is not valid YAML" in err and "line 3" in err


def test_values_the_engine_would_refuse_at_start_up_are_refused_by_name(course_config):
    cases = {("server", "args", "tensor_parallel_size"): 0, ("server", "args", "gpu_memory_utilization"): 1.2,
             ("server", "args", "max_model_len"): -1, ("server", "grid", "max_num_seqs"): [4, 0]}
    for path, value in cases.items():
        config = copy.deepcopy(course_config)
        section = config["experiments"]["week01"]
        for key in path[:-1]:
            section = section.setdefault(key, {})
        section[path[-1]] = value
        with pytest.raises(Exception, match=path[-1]):
            validate(config, SCHEMA)


def test_a_grid_value_listed_twice_and_a_repeated_configuration_are_refused(course_config):
    config = copy.deepcopy(course_config)
    config["experiments"]["week01"]["client"]["grid"]["request_rate"] = [1, 4, 4]
    config["experiments"]["study_phi4"]["server"]["configs"]["again"] = copy.deepcopy(
        config["experiments"]["study_phi4"]["server"]["configs"]["baseline"])
    with pytest.raises(ConfigError) as err:
        check(config)
    assert "experiments.week01.client.grid.request_rate: 4 listed more than once" in str(err.value)
    assert "experiments.study_phi4.server.configs.again: the same configuration as 'baseline'" in str(err.value)


def test_repeats_and_warmup_out_of_range_are_refused(course_config):
    for key, value in (("repeats", 0), ("warmup_prompts", -1)):
        config = copy.deepcopy(course_config)
        config["experiments"]["week01"][key] = value
        with pytest.raises(Exception, match=key):
            validate(config, SCHEMA)


def test_lmcache_settings_that_measure_nothing_are_refused_by_name(course_config):
    """Week 15's point is a cache that outlives a restart: without PYTHONHASHSEED LMCache's
    chunk keys differ per process (measured on an H100: 0 hit tokens after the restart);
    "None" as the disk tier is a directory named None; an fs:// URL without host and port
    is never connected. week15_chunk never restarts."""
    config = copy.deepcopy(course_config)
    del config["experiments"]["week15"]["server"]["env"]["PYTHONHASHSEED"]
    del config["experiments"]["week15_chunk"]["server"]["env"]["PYTHONHASHSEED"]
    with pytest.raises(ConfigError) as err:
        check(config)
    problems = str(err.value).splitlines()[1:]
    assert [p.strip().split(":")[0] for p in problems] == [
        f"experiments.week15.server.env [{tier}]" for tier in ("cpu_tier", "disk_tier", "file_tier")]
    assert all("set PYTHONHASHSEED" in p for p in problems)
    config["experiments"]["week15"]["server"]["env"]["PYTHONHASHSEED"] = "0"
    check(config)
    config["experiments"]["week15_chunk"]["server"]["env"]["LMCACHE_LOCAL_DISK"] = "None"
    with pytest.raises(ConfigError, match=r"week15_chunk.server.env \[LMCACHE_CHUNK_SIZE=64\]: "
                                          r"LMCACHE_LOCAL_DISK 'None' is read by LMCache as a directory"):
        check(config)
    del config["experiments"]["week15_chunk"]["server"]["env"]["LMCACHE_LOCAL_DISK"]
    config["experiments"]["week15"]["server"]["configs"]["file_tier"]["env"]["LMCACHE_REMOTE_URL"] = \
        "fs://{session_dir}/lmcache-fs/"
    with pytest.raises(ConfigError, match=r"week15.server.env \[file_tier\]: LMCACHE_REMOTE_URL "
                                          r"'fs://\{session_dir\}/lmcache-fs/' needs a host and port"):
        check(config)


def test_switching_eval_off_as_the_preflight_suggests_is_a_valid_config(capsys):
    """`experiments: {week12: {eval: null}}` (where lm-eval is missing): week 12's pareto reads
    the accuracy column, so it is left out with a note; its other figure stays."""
    from conftest import load_config
    from servelab.checks import cross_checks

    config = load_config("config/config.yaml", "config/gpu-check.yaml")
    config["experiments"]["week12"]["eval"] = None
    cross_checks.drop_nulled_sections(config)
    cross_checks.check(config)
    figures = config["experiments"]["week12"]["figures"]
    assert "pareto" not in figures and "throughput_by_precision" in figures
    assert "servelab: week12.figures.pareto left out: it reads gsm8k_check_exact_match_strict_match" \
        in capsys.readouterr().err


def test_the_phi4_gpu_overlay_is_valid_and_its_hand_path_lies_in_the_searched_space():
    """config/studies/phi4-search-gpu.yaml: seed 002's search and its hand-tuned path as a grid under
    one SLO and one load range, served from Phi-4-mini's shape, with enough prompts that the
    top of the range is a rate held, not one burst (servelab.search.slo)."""
    from conftest import load_config

    config = validated(load_config("config/config.yaml", "config/studies/phi4-search-gpu.yaml"))
    assert config["models"]["phi4_mini"]["shape"]["config"]["architectures"] == ["Phi3ForCausalLM"]
    search = config["experiments"]["study_phi4_search"]["search"]
    hand = config["experiments"]["study_phi4_hand"]["search"]
    assert hand["strategy"] == "grid" and (hand["slo"], hand["load"]) == (search["slo"], search["load"])
    for knob, values in hand["space"].items():
        assert set(values) <= set(search["space"][knob]), knob
    # the arrivals at the top of the range outlast the 3.2 s median request measured there
    assert config["dummy_weights"]["num_prompts"] / search["load"]["high"] > 3.2


def test_the_steady_state_gpu_overlays_are_valid():
    """config/studies/phi4-steady-gpu.yaml (and the FP8 step after it): every point sized in time."""
    from conftest import load_config

    for overlays in (["config/studies/phi4-steady-gpu.yaml"], ["config/studies/phi4-steady-gpu.yaml", "config/studies/phi4-fp8kv-gpu.yaml"]):
        config = validated(load_config("config/config.yaml", *overlays))
        for name in config["run"]:
            assert config["experiments"][name]["client"]["args"]["duration_s"] > 0, name
    assert config["experiments"]["study_phi4_path_l4kv"]["server"]["args"]["kv_cache_memory_bytes"] == 13.5e9
