"""The sessions the workflow's jobs are made of, read off a config
(servelab/checks/session_plan.py): engine sharing, params, GPUs, priorities, minutes."""
import copy

import pytest
from snakemake.utils import validate

from conftest import REPO
from servelab.checks import cross_checks
from servelab.checks.session_plan import SESSION_RUNTIME_MIN, SessionPlan


def checked(config: dict) -> dict:
    """As workflow/rules/common.smk takes it: nulled sections out, schema defaults, cross-checks."""
    cross_checks.drop_nulled_sections(config)
    validate(config, str(REPO / "config/schema.yaml"))
    cross_checks.check(config)
    return config


def test_the_cpu_default_shares_engines_and_a_host_carries_its_guests(local_config):
    plan = SessionPlan(checked(local_config))
    assert ("week03", "base") in plan.hosts and plan.hosts[("week03", "base")][0] == "week02_latency"
    host = plan.hosts[("week03", "base")]
    params = plan.session_params(*host)
    assert [g["experiment"] for g in params["guests"]] == [g for g, _ in plan.guests_of(host)]
    assert "week03" in [g["experiment"] for g in params["guests"]]
    # a host's job runs its guests' points: its minutes are theirs too
    assert plan.runtime(*host) == sum(SESSION_RUNTIME_MIN[local_config["experiments"][name]["kind"]]
                                      for name, _ in [host, *plan.guests_of(host)])
    assert plan.gpus(*host) == 0 and plan.priority(*host) == 0


def test_params_hold_what_defines_a_measurement_and_keep_machine_settings_out_of_identity(local_config):
    params = SessionPlan(checked(local_config)).params("week01", "base")
    assert params["engine"] == "vllm" and params["kind"] == "serve"
    assert [p["request_rate"] for p in params["client_points"]] == [1, 4, 10, "inf"]
    assert params["env"]["VLLM_WORKER_MULTIPROC_METHOD"] == "fork"     # engine env: runs with it
    assert "VLLM_WORKER_MULTIPROC_METHOD" not in params["identity_env"]  # but measures the same
    assert params["measurement"]["repeats"] == 3


def test_the_course_on_gpus_orders_wide_sessions_first(course_config):
    plan = SessionPlan(checked(course_config))
    assert plan.gpus("week13", "tensor_parallel_size=4") == 4
    assert plan.priority("week13", "tensor_parallel_size=4") > 100 * 2 ** 2 + 99 > plan.priority("week01", "base")


def test_an_unknown_server_point_is_named_with_those_known(course_config):
    with pytest.raises(ValueError, match=r"week13 has no server point 'tp=3'; known: \['tensor_parallel_size=1'"):
        SessionPlan(checked(course_config)).knobs("week13", "tp=3")


def test_a_configuration_measured_without_its_record_says_so_and_passes_no_such_flag(local_config):
    exp = local_config["experiments"]["week04"]
    exp["server"]["configs"] = {"recorded": {}, "unrecorded": {"record_conditions": False}}
    exp["server"].pop("grid")
    exp.pop("figures")
    plan = SessionPlan(checked(local_config))
    bare, recorded = plan.params("week04", "unrecorded"), plan.params("week04", "recorded")
    assert bare["measurement"]["record_conditions"] is False
    assert recorded["measurement"]["record_conditions"] is True   # the run's default
    assert "record_conditions" not in bare["server_knobs"] and bare["server_knobs"] == recorded["server_knobs"]
    exp["server"]["configs"]["unrecorded"] = {"record_conditions": "no"}
    with pytest.raises(Exception, match="'no' is not of type 'boolean'"):
        checked(local_config)


def test_an_experiment_in_rounds_is_measured_by_its_first_configurations_job(local_config):
    plan = SessionPlan(checked(local_config))
    first, other = ("study_tuning_cpu", "baseline"), ("study_tuning_cpu", "seqs4")
    assert plan.round_host(other) == first and plan.round_host(first) is None
    params = plan.session_params(*first)
    assert [m["server_point"] for m in params["round_members"]] == ["seqs4"]
    assert params["round_members"][0]["params"]["server_knobs"]["max_num_seqs"] == 4
    assert params["rounds"]["configurations"] == ["baseline", "seqs4"] and params["rounds"]["seed"] == 0
    assert "round_members" not in plan.session_params(*other) and plan.session_params(*other)["rounds"]
    assert first not in plan.hosts and other not in plan.hosts   # no engine shared with another experiment
    assert plan.runtime(*first) == 2 * SESSION_RUNTIME_MIN["serve"]


@pytest.mark.parametrize("change, named", [
    (lambda e, c: e["server"].pop("configs"), "rounds compare configurations; this experiment has one"),
    (lambda e, c: e.update(repeat_until={"metric": "output_throughput", "within": 0.05}), "leave repeat_until out"),
    (lambda e, c: e["rounds"].update(least=5, most=4), "rounds.most: 4 is below least (5)"),
])
def test_rounds_that_cannot_be_run_are_refused_by_name(local_config, change, named):
    change(local_config["experiments"]["study_tuning_cpu"], local_config)
    with pytest.raises(cross_checks.ConfigError, match=named.replace("(", r"\(").replace(")", r"\)")):
        checked(local_config)


def test_on_gpus_the_rounds_job_asks_for_each_configurations_share_before_any_start(local_config):
    from servelab.serve.rounds import gpu_shares
    from servelab.serve.session_spec import SessionSpec

    plan = SessionPlan(checked(local_config))
    specs = [SessionSpec.from_params("study_tuning_cpu", sp, plan.params("study_tuning_cpu", sp), model_path="m",
                                     dataset_path=None, store_dir="s") for sp in ("baseline", "seqs4")]
    assert gpu_shares(specs, None) is None   # the CPU: no shares to ask
    assert "gpu_memory_utilization, summing to at most 0.95 (now ['unset', 'unset'])" in gpu_shares(specs, ["0"])
    for spec, share in zip(specs, (0.45, 0.45)):
        spec.server_knobs["gpu_memory_utilization"] = share
    assert gpu_shares(specs, ["0"]) is None
    specs[1].server_knobs["gpu_memory_utilization"] = 0.6
    assert "(now [0.45, 0.6])" in gpu_shares(specs, ["0"])


def test_rounds_start_their_servers_together_on_gpus_where_each_fixes_its_kv_cache(local_config):
    """`starts: auto` overlaps the starts only where no server sizes its KV cache from the
    memory the others leave while they start; a config can ask either way."""
    from servelab.serve.rounds import starts_together
    from servelab.serve.session_spec import SessionSpec

    def specs(**rounds):
        config = copy.deepcopy(local_config)
        config["experiments"]["study_tuning_cpu"]["rounds"].update(rounds)
        plan = SessionPlan(checked(config))
        return [SessionSpec.from_params("study_tuning_cpu", sp, plan.params("study_tuning_cpu", sp), model_path="m",
                                        dataset_path=None, store_dir="s") for sp in ("baseline", "seqs4")]

    auto = specs()
    assert not starts_together(auto, None) and not starts_together(auto, ["0"])   # a CPU; caches sized at start
    for spec in auto:
        spec.server_knobs["kv_cache_memory_bytes"] = 2 * 2**30
    assert starts_together(auto, ["0"]) and not starts_together(auto, None)
    auto[1].server_knobs.pop("kv_cache_memory_bytes")
    assert not starts_together(auto, ["0"])
    assert starts_together(specs(starts="together"), None) and not starts_together(specs(starts="in_turn"), ["0"])
    with pytest.raises(Exception, match="'at_once' is not one of"):
        specs(starts="at_once")
