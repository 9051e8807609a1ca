"""run_what_fits: of the course, what a box cannot run is left out one line each, by GPUs,
GPU memory, packages where the engine imports them and profilers on PATH
(servelab/checks/box_fit.py); the DAG a dry run builds then lacks exactly those."""
import re
import subprocess
import sys

import pytest

from conftest import REPO, load_config
from servelab.checks import box_fit
from servelab.checks.cross_checks import drop_nulled_sections
from servelab.config.experiments import enabled_experiments, server_points

H100 = dict(gpu_name="NVIDIA H100 80GB HBM3", gpu_memory_gib=79.6)


def everything(module, env=None):
    return True


def on_path(tool):
    return f"/usr/bin/{tool}"


@pytest.fixture
def check_config():
    return drop_nulled_sections(load_config("config/gpu-check.yaml"))


def test_on_two_gpus_week13_loses_its_tp4_point_by_name_and_keeps_the_rest(check_config):
    decision = box_fit.decide(check_config, box_fit.Box(gpus=2, **H100), has=everything, which=on_path)
    assert decision.lines() == ["week13 [tensor_parallel_size=4]: needs 4 GPUs, 2 here"]
    box_fit.apply(check_config, decision)
    assert list(server_points(check_config["experiments"]["week13"])) == \
        ["tensor_parallel_size=1", "tensor_parallel_size=2"]
    assert "week13" in enabled_experiments(check_config)


def test_on_one_gpu_experiments_whose_every_point_needs_two_are_left_out_whole(check_config):
    decision = box_fit.decide(check_config, box_fit.Box(gpus=1, **H100), has=everything, which=on_path)
    assert decision.experiments["week14"] == "needs 2 GPUs, 1 here"
    assert decision.experiments["week16"] == "needs 2 GPUs, 1 here"        # the P/D pair: both roles
    assert set(decision.points["week13"]) == {"tensor_parallel_size=2", "tensor_parallel_size=4"}
    box_fit.apply(check_config, decision)
    assert "week14" not in enabled_experiments(check_config)
    assert "week01" in enabled_experiments(check_config)


def test_a_missing_package_leaves_out_its_experiment_with_the_install_command(check_config):
    def no_lmcache(module, env=None):
        return module != "lmcache"

    decision = box_fit.decide(check_config, box_fit.Box(gpus=4, **H100), has=no_lmcache, which=on_path)
    assert set(decision.experiments) == {"week15", "week15_chunk"}
    assert decision.experiments["week15"].startswith("needs lmcache (pip install lmcache")


def test_the_engine_is_looked_up_where_its_processes_import_it(check_config):
    seen = []

    def record(module, env=None):
        seen.append((module, (env or {}).get("PYTHONPATH")))
        return module != "sglang"

    check_config["engines"]["sglang"]["env"] = {"PYTHONPATH": "/tmp/sglang-site"}
    decision = box_fit.decide(check_config, box_fit.Box(gpus=4, **H100), has=record, which=on_path)
    assert ("sglang", "/tmp/sglang-site") in seen
    assert {"week01_sglang", "week06", "week09", "week09_dp", "week16_sglang"} <= set(decision.experiments)


def test_without_lm_eval_week12_runs_without_its_eval_and_accuracy_figure(check_config, capsys):
    def no_lm_eval(module, env=None):
        return module != "lm_eval"

    decision = box_fit.decide(check_config, box_fit.Box(gpus=4, **H100), has=no_lm_eval, which=on_path)
    assert decision.experiments == {}
    assert decision.lines() == ["week12.eval off: needs lm_eval (pip install lm-eval==0.4.13)"]
    box_fit.apply(check_config, decision)
    week12 = check_config["experiments"]["week12"]
    assert "eval" not in week12 and "pareto" not in week12["figures"]
    assert "week12.figures.pareto left out" in capsys.readouterr().err


def test_a_profiler_not_on_path_leaves_out_its_week():
    config = drop_nulled_sections(load_config("config/gpu-check.yaml"))
    decision = box_fit.decide(config, box_fit.Box(gpus=1, **H100), has=everything,
                              which=lambda tool: None if tool == "nsys" else on_path(tool))
    assert decision.experiments["week03_nsys"] == "needs nsys (its profiler) on PATH"
    assert "week03_ncu" not in decision.experiments


def test_a_point_too_big_for_the_gpu_is_left_out_with_the_plan_s_reason(check_config):
    l4 = box_fit.Box(gpus=4, gpu_name="NVIDIA L4", gpu_memory_gib=22.5)
    decision = box_fit.decide(check_config, l4, has=everything, which=on_path)
    assert decision.experiments["week14"].startswith("does not fit one NVIDIA L4: no memory for the KV cache")
    assert "week01" not in decision.experiments      # 15 GiB of bf16 weights fit a 24 GB card


def test_no_gpu_here_says_how_to_give_a_cluster_node_s_and_runs_nothing(check_config):
    decision = box_fit.decide(check_config, box_fit.Box(gpus=0), has=everything, which=on_path)
    assert decision.experiments["week01"].startswith("needs 1 GPU(s), none here (on a cluster give")
    with pytest.raises(ValueError, match="this box runs none of the experiments:\n  week01: needs 1 GPU"):
        box_fit.apply(check_config, decision)


def test_a_figure_joining_a_left_out_experiment_draws_without_it(check_config):
    joins = {name: fig for name, exp in check_config["experiments"].items()
             for fig, spec in (exp.get("figures") or {}).items() if spec and spec.get("also_from")}
    name, fig = next(iter(joins.items()))
    other = check_config["experiments"][name]["figures"][fig]["also_from"][0]
    box_fit.apply(check_config, box_fit.Decision(experiments={other: "left out for the test"}))
    assert other not in check_config["experiments"][name]["figures"][fig]["also_from"]


def test_a_job_takes_the_main_process_decision_not_its_own(check_config, monkeypatch):
    """On a SLURM node a job sees its own GPUs: it must not decide again."""
    main = box_fit.Decision(points={"week13": {"tensor_parallel_size=4": "needs 4 GPUs, 2 here"}})
    monkeypatch.setenv(box_fit.DECISION_ENV, main.to_json())
    check_config["run_what_fits"] = True
    taken = box_fit.fit(check_config, main_process=False, box=box_fit.Box(gpus=0))
    assert taken.lines() == main.lines()
    assert "week01" in enabled_experiments(check_config)


def test_leave_out_naming_no_point_is_an_error():
    with pytest.raises(ValueError, match=r"leave_out names no server point: \['tensor_parallel_size=8'\]"):
        server_points({"server": {"grid": {"tensor_parallel_size": [1, 2]}, "leave_out": ["tensor_parallel_size=8"]}})


def test_a_dry_run_on_two_gpus_lists_what_it_leaves_out_and_builds_no_job_for_it():
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", "config/config.yaml",
                          "config/gpu-check.yaml", "--config", "gpus_here=2", "gpu_here=NVIDIA H100 80GB HBM3"],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "servelab run-what-fits: on 2 GPU(s) (NVIDIA H100 80GB HBM3): runs" in out.stderr
    assert "servelab run-what-fits:   week13 [tensor_parallel_size=4]: needs 4 GPUs, 2 here" in out.stderr
    jobs = out.stdout + out.stderr
    assert "server_point=tensor_parallel_size=2" in jobs
    assert "server_point=tensor_parallel_size=4" not in jobs
    # the session rule's priorities (workflow/rules/common.smk): wider first, then the longest
    priority = {}
    for block in (text.split("\n[")[0] for text in jobs.split("rule session:")[1:]):
        where, rank = re.search(r"wildcards: experiment=(\S+), server_point=(\S+)", block), \
            re.search(r"priority: (\d+)", block)
        priority[where[1], where[2]] = int(rank[1]) if rank else 0
    assert priority["week13", "tensor_parallel_size=2"] == 100 * 2 ** 2 + 3        # three rates
    static = {("week04_static", "base"), ("week07_static", "base")}                  # static batching
    assert {priority[k] for k in static} == {100 + 99}
    one_gpu = [v for k, v in priority.items() if 100 <= v < 400 and k not in static]
    assert one_gpu and max(one_gpu) < 199
    # the sessions start together, once every model and dataset is made: each waits for the
    # marker, whose job waits for every model the run's sessions read
    marker = "resources/models/.run-inputs-made"
    sessions = jobs.split("rule session:")[1:]
    assert all(marker in block.split("output:")[0] for block in sessions)
    made = jobs.split("rule run_inputs_made:")[1].split("output:")[0].split("input:")[1]
    assert {"resources/models/shapes/llama31_8b", "resources/models/shapes/llama31_8b_fp8",
            "resources/models/shapes/mixtral_8x7b", "resources/datasets/synthetic_sharegpt.json"} <= \
        {f.strip() for f in made.split(",")}
    # on one machine (no SLURM) a session builds FlashInfer's JIT modules itself before it
    # claims a GPU, while its pre-started server imports: no job of the DAG comes first
    # (tests/run/test_single_node.py runs it; under SLURM the jobs do: tests/config/test_course.py)
    assert "rule prebuild_jit:" not in jobs
    assert not any("jit-prebuilt" in block.split("output:")[0] for block in sessions)


@pytest.mark.parametrize("argv, asked", [
    (["snakemake", "-n"], True), (["snakemake", "-np", "--cores", "2"], True), (["snakemake", "--dry-run"], True),
    (["snakemake", "--cores", "2", "-p"], False), (["snakemake", "--configfile", "n.yaml"], False),
])
def test_a_dry_run_is_read_from_the_command_line(argv, asked):
    assert box_fit.dry_run(argv) is asked


def test_a_dry_run_with_no_gpu_here_previews_the_whole_gpu_course():
    """A laptop or a login node previews the GPU check's DAG before queueing: every
    experiment, and what a run on this box would leave out, one line each."""
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", "config/config.yaml",
                          "config/gpu-check.yaml"], cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "CUDA_VISIBLE_DEVICES": ""})
    assert out.returncode == 0, out.stderr[-3000:]
    assert "servelab run-what-fits: dry run: the whole DAG, 30 experiment(s)" in out.stderr
    assert "a run on 0 GPU(s) would leave out 30:" in out.stderr
    assert "week01: needs 1 GPU(s), none here (on a cluster give the GPUs of a node" in out.stderr
    jobs = out.stdout + out.stderr
    assert "server_point=tensor_parallel_size=4" in jobs and "experiment=week16_sglang" in jobs
