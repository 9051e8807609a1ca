"""Which sessions of different experiments share one engine start (`share_engines`)."""
import re
import subprocess
import sys

from conftest import REPO

from servelab.config import engine_groups


def params(**over):
    """A session's params as workflow/rules/common.smk builds them (the parts that matter here)."""
    base = {"engine": "vllm", "kind": "serve", "tool": None, "model_identity": "shape:abc",
            "server_knobs": {"max_model_len": 2048}, "env": {}, "startup_timeout_s": 600,
            "measurement": {"reset_prefix_cache": True, "warmup_prompts": 8},
            "client_points": [{"request_rate": 1}], "topology": None, "monitors": {}, "load_search": None,
            "dataset_identity": "sharegpt"}
    return {**base, **over}


def test_the_first_session_of_an_engine_configuration_hosts_the_later_ones():
    sessions = {
        ("week01", "base"): params(),
        ("week05", "base"): params(server_knobs={"max_model_len": 2048, "enable_prefix_caching": True}),
        # another workload, warm-up and dataset: the engine is the same
        ("week16_standard", "base"): params(client_points=[{"random_input_len": 128}], dataset_identity="random",
                                            measurement={"reset_prefix_cache": True, "warmup_prompts": 2}),
        ("week07", "base"): params(kind="offline", tool="throughput"),
        ("week02_throughput", "base"): params(kind="offline", tool="throughput"),
        ("week03", "base"): params(kind="offline", tool="latency"),     # another benchmark: its own engine
        ("week12", "bf16"): params(),
    }
    assert engine_groups.hosts(sessions) == {
        ("week16_standard", "base"): ("week01", "base"),
        ("week02_throughput", "base"): ("week07", "base"),
        ("week12", "bf16"): ("week01", "base")}
    assert engine_groups.summary(engine_groups.hosts(sessions), len(sessions)).startswith(
        "7 sessions, 4 engine starts: week16_standard/base on week01/base")


def test_what_a_shared_engine_would_change_keeps_its_own_start():
    unshared = {
        "model": params(model_identity="shape:other"),
        "env": params(env={"VLLM_ATTENTION_BACKEND": "FLASHINFER"}),
        "prefix cache reset (the server's env)": params(measurement={"reset_prefix_cache": False}),
        "timeout": params(startup_timeout_s=60),
        "engine": params(engine="sglang"),
        # a profiler traces its own experiment, a restart restarts it, a topology is its own
        # fleet, a search's load bisection is one experiment's
        "profiler": params(monitors={"torch_profile": {}}),
        "restart": params(client_points=[{"restart": 0}, {"restart": 1}]),
        "topology": params(topology={"prefill": {}, "decode": {}}),
        "search": params(load_search={"knob": "max_concurrency"}),
    }
    for what, session in unshared.items():
        sessions = {("a", "base"): params(), ("b", "base"): session, ("c", "base"): session}
        guests = engine_groups.hosts(sessions)
        assert ("b", "base") not in guests, what
        shareable = what not in ("profiler", "restart", "topology", "search")
        assert guests == ({("c", "base"): ("b", "base")} if shareable else {}), what


# the check runs what the box can (run_what_fits): fitted to one H100, as on a one-GPU box
ONE_H100 = ["gpus_here=1", "gpu_here=NVIDIA H100 80GB HBM3"]


def session_edges(*config_args: str) -> tuple[set[tuple[str, str]], str]:
    """(experiment, experiment) edges between session jobs in the dry run's DAG, and its log."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--dag",
                           "--configfile", "config/config.yaml", "config/gpu-check.yaml", "--config", *ONE_H100, *config_args],
                          cwd=REPO, capture_output=True, text=True, check=True)
    sessions = dict(re.findall(r'(\d+)\[label = "session\\nexperiment: (\w+)', proc.stdout))
    return {(sessions[a], sessions[b]) for a, b in re.findall(r"(\d+) -> (\d+)", proc.stdout)
            if a in sessions and b in sessions}, proc.stderr


def test_the_gpu_check_shares_five_starts_and_each_guest_runs_after_its_host():
    edges, log = session_edges()   # config/gpu-check.yaml sets it
    assert "servelab engines shared: 51 sessions, 46 engine starts" in log
    assert edges == {("week02_latency", "week03"), ("week02_throughput", "week07"),
                     ("week04_static", "week07_static"), ("week11", "week11_k"), ("week01", "week12")}
    # off, or with the host not in the run: every session starts its own
    assert session_edges("share_engines=False")[0] == set()
    edges, log = session_edges("share_engines=True", "run=[week03,week07]")
    assert edges == set() and "engines shared" not in log


def session_runtimes(*config_args: str) -> dict[str, int]:
    """{experiment/server_point: the runtime (min) the dry run gives its session job}."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1",
                           "--configfile", "config/config.yaml", "config/gpu-check.yaml", "--config", *ONE_H100, *config_args],
                          cwd=REPO, capture_output=True, text=True, check=True)
    runtimes, session = {}, None
    for line in proc.stdout.splitlines():
        if m := re.match(r"\s+output: results/(\w+)/sessions/(\S+)\.json$", line):
            session = f"{m[1]}/{m[2]}"
        elif session and (m := re.search(r"resources: .*runtime=(\d+)", line)):
            runtimes[session], session = int(m[1]), None
    return runtimes


def test_a_host_job_asks_the_cluster_for_its_guests_minutes_too():
    run = "run=[week02_latency,week03,week01,week12]"
    shared = session_runtimes(run)
    # offline 120 min, serve 240: week 3 runs in week 2's job, week 12's bf16 point in week 1's
    assert shared["week02_latency/base"] == 120 + 120 and shared["week03/base"] == 120
    assert shared["week01/base"] == 240 + 240 and shared["week12/model=llama31_8b"] == 240
    assert shared["week12/model=llama31_8b_fp8"] == 240
    alone = session_runtimes(run, "share_engines=False")
    assert alone["week02_latency/base"] == 120 and alone["week01/base"] == 240
