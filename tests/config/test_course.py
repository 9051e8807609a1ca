"""The course on GPUs: every experiment previews on a machine with no GPU and no SLURM."""
import re
import time

from conftest import make_workdir, snakemake
from servelab.config.experiments import gpus_needed, point_id, server_points
from servelab.serve.topology import topology_gpus


def dry_run_jobs(output: str) -> list[dict]:
    """The jobs of a dry run, as {rule, wildcards, resources} dicts."""
    jobs = []
    for block in re.split(r"\n\s*\n", output):
        rule = re.search(r"^(?:local)?(?:rule|checkpoint) (\w+):", block, re.M)
        if not rule:
            continue
        wildcards = re.search(r"wildcards: (.*)", block)
        resources = re.search(r"resources: (.*)", block)
        jobs.append({
            "rule": rule.group(1),
            "wildcards": dict(kv.split("=", 1) for kv in wildcards.group(1).split(", ")) if wildcards else {},
            "resources": dict(kv.split("=", 1) for kv in resources.group(1).split(", ")) if resources else {},
            "input": block.split("output:")[0],
        })
    return jobs


def test_slurm_profile_dry_run_lists_every_experiment_with_its_gpus(tmp_path, course_config):
    work = make_workdir(tmp_path / "wf")
    started = time.monotonic()
    # the profile by name, as users type it (Snakemake looks in the working directory
    # first, where `slurm` links to profiles/slurm)
    proc = snakemake(work, "--profile", "slurm", "-n")
    took = time.monotonic() - started
    jobs = dry_run_jobs(proc.stdout + proc.stderr)
    sessions = {(j["wildcards"]["experiment"], j["wildcards"]["server_point"]): j
                for j in jobs if j["rule"] == "session"}
    searches = {name for name, exp in course_config["experiments"].items() if exp.get("search")}
    expected = {(name, sp) for name, exp in course_config["experiments"].items() for sp in server_points(exp)
                if name not in searches}
    assert set(sessions) == expected
    # a search's sessions are known round by round: a preview shows its first plan
    rounds = {(j["wildcards"]["experiment"], j["wildcards"]["round"]) for j in jobs if j["rule"] == "search_round"}
    assert searches and rounds == {(name, "0") for name in searches}
    tables = {j["wildcards"]["experiment"] for j in jobs if j["rule"] == "metrics_table"}
    assert tables == set(course_config["experiments"])
    for (name, sp), job in sessions.items():
        exp = course_config["experiments"][name]
        assert int(job["resources"]["gpu"]) == topology_gpus(server_points(exp)[sp], exp.get("topology"))
        assert job["resources"]["slurm_partition"] == "gpu" and job["resources"]["gpu_model"] == "a100"
    assert sessions[("week13", "tensor_parallel_size=4")]["resources"]["gpu"] == "4"
    assert sessions[("week14", "enable_expert_parallel=true")]["resources"]["gpu"] == "2"
    assert sessions[("week16", "base")]["resources"]["gpu"] == "2"          # a prefill and a decode server
    assert sessions[("week09_dp", "router_policy=cache_aware")]["resources"]["gpu"] == "2"  # dp_size 2
    # FlashInfer's JIT is a step of the DAG under SLURM, a job per module, before a vLLM
    # session that needs it holds a GPU (workflow/rules/serve.smk): the sampler for every
    # vLLM start, the all-reduce for tensor parallelism; SGLang and HF build their own
    assert sum(job["rule"] == "prebuild_jit" for job in jobs) == 2
    course = course_config["experiments"]
    tp2 = {name for name, exp in course.items()
           if ((exp.get("server") or {}).get("args") or {}).get("tensor_parallel_size") == 2}
    waits = {(name, sp): tuple(m for m in ("sampling", "trtllm_comm") if f"jit-prebuilt/vllm/{m}.json" in job["input"])
             for (name, sp), job in sessions.items()}
    assert waits == {(name, sp): ("sampling", "trtllm_comm") if re.search(r"tensor_parallel_size=[24]", sp) or name in tp2
                     else ("sampling",) if course[name].get("engine") == "vllm" else () for name, sp in waits}
    assert {name for (name, _), w in waits.items() if w} >= {"week01", "week13"}
    assert not waits[("week09", next(sp for n, sp in waits if n == "week09"))]          # SGLang
    for job in jobs:
        if job["rule"] == "prebuild_jit":   # nvcc on a GPU node, no GPU held
            assert "gpu" not in job["resources"] and job["resources"]["slurm_partition"] == "gpu"
        elif job["rule"] != "session":
            assert "gpu" not in job["resources"] and job["resources"].get("slurm_partition", "cpu") == "cpu"
    # the preview names each point that will not fit the profile's GPU (a100: the 40 GB card)
    # and the one setting that leaves them out
    preview = [line for line in proc.stderr.splitlines() if line.startswith("servelab preview:")]
    assert "server point(s) will not fit one GPU (the profile's gpu_model 'a100', planned as 40.0 GiB" in preview[0]
    named = {re.match(r"servelab preview:   (\w+) \[", line).group(1) for line in preview[1:-1]}
    assert named == {"week06", "week09", "week09_dp", "week14", "week15_multiturn", "week16_sglang"}
    assert "--config run_what_fits=true 'gpu_here=a100' gpus_here=N" in preview[-1]
    print(f"\ndry run of {len(course_config['experiments'])} experiments, {len(jobs)} jobs: {took:.2f}s")


def test_the_slurm_preview_plans_the_card_named_and_leaves_out_what_does_not_fit(tmp_path):
    work = make_workdir(tmp_path / "wf")
    h100 = snakemake(work, "--profile", "slurm", "-n", "--config", "gpu_here=NVIDIA H100 80GB HBM3")
    preview = [line for line in h100.stderr.splitlines() if line.startswith("servelab preview:")]
    assert preview == ["servelab preview: every server point fits one GPU (gpu_here 'NVIDIA H100 80GB HBM3', planned "
                       "as 79.6 GiB)"]
    fitted = snakemake(work, "--profile", "slurm", "-n", "--config", "run_what_fits=true", "gpu_here=a100",
                       "gpus_here=4")
    sessions = {(j["wildcards"]["experiment"]) for j in dry_run_jobs(fitted.stdout) if j["rule"] == "session"}
    assert not {"week06", "week09", "week14"} & sessions and "week01" in sessions
    assert "servelab preview:" not in fitted.stderr


def test_gpus_needed_multiplies_parallel_sizes():
    assert gpus_needed({}) == 1
    assert gpus_needed({"tensor_parallel_size": 4}) == 4
    assert gpus_needed({"tensor_parallel_size": 2, "pipeline_parallel_size": 2}) == 4
    assert gpus_needed({"tensor_parallel_size": 2, "data_parallel_size": 2}) == 4
    assert gpus_needed({"tp": 2, "dp": 2}) == 4  # SGLang's names


def test_server_point_ids_of_json_knobs_are_path_safe(course_config):
    ids = list(server_points(course_config["experiments"]["week11"]))
    assert ids[0] == "speculative_config=none"
    assert all("/" not in i and " " not in i for i in ids)
    assert len(set(ids)) == 3
    assert point_id({"model": "llama31_8b_fp8"}) == "model=llama31_8b_fp8"


def test_the_mission_command_previews_week12s_pareto_figure(tmp_path):
    work = make_workdir(tmp_path / "wf")
    jobs = dry_run_jobs(snakemake(work, "--profile", "slurm", "results/week12/pareto.png", "-n").stdout)
    figures = [j["wildcards"] for j in jobs if j["rule"] == "figure"]
    assert figures == [{"experiment": "week12", "figure": "pareto"}]
    assert {j["wildcards"]["server_point"] for j in jobs if j["rule"] == "session"} == {
        "model=llama31_8b", "model=llama31_8b_fp8", "model=llama31_8b_awq"}


def test_single_node_profile_previews_week13_with_its_gpu_counts(tmp_path):
    """One multi-GPU machine, no SLURM: the TP=2 and TP=4 points ask for 2 and 4 GPUs
    (which ones each job gets is servelab.run.gpu_claims', tested in test_gpu_claims.py)."""
    work = make_workdir(tmp_path / "wf")
    # (targets before --resources: it takes every word after it)
    proc = snakemake(work, "results/week13/metrics.csv", "--profile", "profiles/single-node",
                     "--resources", "gpu=4", "-n")
    jobs = dry_run_jobs(proc.stdout)
    gpus = {j["wildcards"]["server_point"]: j["resources"]["gpu"] for j in jobs if j["rule"] == "session"}
    assert gpus == {"tensor_parallel_size=1": "1", "tensor_parallel_size=2": "2", "tensor_parallel_size=4": "4"}
    assert all("slurm_partition" not in j["resources"] for j in jobs)
