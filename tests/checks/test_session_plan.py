"""The sessions the workflow's jobs are made of, read off a config
(servelab/checks/session_plan.py): engine sharing, params, GPUs, priorities, minutes."""
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
