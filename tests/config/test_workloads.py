"""Workload kinds in the config (servelab.config.workloads): what each sends, and bad input
refused by name before any job (the schema, then the cross-checks)."""
import json

import pytest
from snakemake.exceptions import WorkflowError

from servelab.checks.cross_checks import ConfigError
from servelab.checks.session_plan import SessionPlan
from servelab.config import workloads
from tests.conftest import REPO

SCHEMA = str(REPO / "config/schema.yaml")

from tests.conftest import validated  # noqa: E402


def test_each_kind_reaches_its_client_in_every_load_point(local_config, course_config):
    local = SessionPlan(validated(local_config))
    multi = local.params("multiturn_cpu", "cache_on")
    assert multi["dataset_name"] == "multi_turn"
    assert all(p["multi_turn"]["turns"] == 3 for p in multi["client_points"])
    # the points a table expects are the points the session measured
    assert local.client_points("multiturn_cpu")["cache_on"] == multi["client_points"]
    replay = local.params("trace_replay_cpu", "base")
    assert replay["dataset_name"] == "timed_trace"
    # the trace's ms at half its gaps, in the seconds vLLM's client takes
    assert replay["client_points"][0]["timed_trace_sec_multiplier"] == pytest.approx(0.0005)
    assert local.files("trace_replay_cpu", "base")["dataset"].endswith("tiny_trace.json")
    assert "dataset" not in local.files("multiturn_cpu", "cache_on")
    course = SessionPlan(validated(course_config))
    shared = course.params("workload_matrix_shared_prefix", "base")
    assert shared["dataset_name"] == "prefix_repetition"
    assert {p["num_prompts"] for p in shared["client_points"]} == {200}
    assert workloads.client_knobs(course_config["datasets"]["agents_shared_prefix"], "sglang")["gsp_num_groups"] == 8


@pytest.mark.parametrize("mutate, named", [
    (lambda c: c["datasets"]["chat_cpu"]["multi_turn"].update(turns=0), "0 is less than the minimum of 1"),
    (lambda c: c["datasets"]["tiny_trace"]["trace"].pop("block_tokens"), "'block_tokens' is a required property"),
])
def test_the_schema_refuses_a_turn_count_of_0_and_a_trace_without_its_block_size(local_config, mutate, named):
    mutate(local_config)
    with pytest.raises(WorkflowError) as err:
        validated(local_config)
    assert named in str(err.value)


def test_a_turn_count_of_0_is_refused_by_name_by_the_cross_check_too():
    spec = {"multi_turn": {"users": 2, "turns": 0, "prompt_len": 8, "output_len": 4}}
    assert workloads.problems("chat", spec, [2048]) == ["datasets.chat.multi_turn.turns: must be >= 1 (got 0)"]


def test_a_shared_length_above_max_model_len_is_refused_by_name(course_config):
    course_config["datasets"]["agents_shared_prefix"]["shared_prefix"]["shared_len"] = 9000
    with pytest.raises(ConfigError, match=r"datasets.agents_shared_prefix.shared_prefix.shared_len: 9000 is "
                                          r"above max_model_len 8192"):
        validated(course_config)


@pytest.mark.parametrize("edit, named", [
    (lambda rows: rows[0].pop("output_length"), "line 1 lacks field(s) ['output_length']"),
    (lambda rows: rows.reverse(), "line 2: timestamps not sorted"),
])
def test_a_bad_trace_file_is_refused_by_name(local_config, tmp_path, edit, named):
    rows = [json.loads(line) for line in (REPO / "resources/traces/tiny_trace.jsonl").read_text().splitlines()]
    edit(rows)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    local_config["datasets"]["tiny_trace"]["trace"]["file"] = str(bad)
    with pytest.raises(ConfigError) as err:
        validated(local_config)
    assert f"datasets.tiny_trace.trace.file: {bad}: {named}" in str(err.value)


def test_a_trace_replay_on_sglang_is_refused_by_name(course_config):
    course_config["experiments"]["workload_matrix_trace"]["engine"] = "sglang"
    with pytest.raises(ConfigError, match=r"experiments.workload_matrix_trace.dataset: 'tiny_trace' is a trace; "
                                          r"SGLang's client reads another trace layout"):
        validated(course_config)
