"""The all-reduce fusion size a TP > 1 start names, so that vLLM's API server never imports
FlashInfer (which initialises CUDA and makes vLLM spawn its engine process and workers)."""
import json
import subprocess
import sys

from servelab.engines import commands

from servelab.engines.vllm import fusion_size


def test_the_table_is_read_from_the_installed_vllm_without_importing_it():
    before = set(sys.modules)
    table = fusion_size.vllm_source_table()
    assert table is not None and table[90][2] == 64 and table[90][4] == 2
    assert not any(m == "vllm" or m.startswith("vllm.") for m in set(sys.modules) - before)


def test_another_vllm_without_the_table_adds_nothing(tmp_path):
    module = tmp_path.joinpath(*fusion_size.FUSION_MODULE)
    module.parent.mkdir(parents=True)
    module.write_text("SOMETHING_ELSE = {90: {2: 1}}\n")
    assert fusion_size.vllm_source_table(tmp_path) is None
    assert fusion_size.vllm_source_table(tmp_path / "absent") is None


def test_the_size_vllm_would_choose_is_named_at_tp_above_one():
    table = fusion_size.vllm_source_table()
    knobs = fusion_size.with_fusion_size({"tensor_parallel_size": 2, "max_num_seqs": 64}, ["9.0", "9.0"], table)
    assert knobs["compilation_config"] == {"pass_config": {"fi_allreduce_fusion_max_size_mb": 64}}
    assert fusion_size.with_fusion_size({"tensor_parallel_size": 4}, ["9.0"], table)[
        "compilation_config"]["pass_config"]["fi_allreduce_fusion_max_size_mb"] == 2
    flags = commands.to_flags(knobs)
    assert flags[flags.index("--compilation-config") + 1] == '{"pass_config":{"fi_allreduce_fusion_max_size_mb":64}}'


def test_nothing_is_added_where_vllm_would_look_nothing_up_or_the_experiment_chose():
    table = fusion_size.vllm_source_table()
    for knobs, caps in [({"tensor_parallel_size": 1}, ["9.0"]),         # no all-reduce
                        ({}, ["9.0"]),
                        ({"tensor_parallel_size": 2}, ["8.0"]),         # a GPU the table lacks
                        ({"tensor_parallel_size": 2}, ["9.0", "8.0"]),  # GPUs that differ
                        ({"tensor_parallel_size": 3}, ["9.0"]),         # a TP size it lacks
                        ({"tensor_parallel_size": 2}, [])]:
        assert fusion_size.with_fusion_size(knobs, caps, table) == knobs
    own = {"tensor_parallel_size": 2, "compilation_config": {"pass_config": {"fi_allreduce_fusion_max_size_mb": 8}}}
    assert fusion_size.with_fusion_size(own, ["9.0"], table) == own
    merged = fusion_size.with_fusion_size(
        {"tensor_parallel_size": 2, "compilation_config": {"cudagraph_mode": "PIECEWISE", "pass_config": {"fuse_allreduce_rms": True}}},
        ["9.0"], table)["compilation_config"]
    assert merged == {"cudagraph_mode": "PIECEWISE",
                      "pass_config": {"fuse_allreduce_rms": True, "fi_allreduce_fusion_max_size_mb": 64}}
    # no CUDA GPU here: a CPU start is left as it is
    assert fusion_size.start_knobs("vllm", {"tensor_parallel_size": 2}, lambda: []) == {"tensor_parallel_size": 2}
    assert fusion_size.start_knobs("sglang", {"tensor_parallel_size": 2}, lambda: ["9.0"]) == {"tensor_parallel_size": 2}
    assert fusion_size.start_knobs("vllm", {"tensor_parallel_size": 2}, lambda: ["9.0"])["compilation_config"] == \
        {"pass_config": {"fi_allreduce_fusion_max_size_mb": 64}}


# the real vLLM: its pass config imports the fusion module (and with it flashinfer.comm on a
# CUDA box) for the default size, and not once the size is named. Each import of the module
# is recorded as it is asked for (on a CPU the module itself then fails for want of CUDA ops).
PROBE = """
import json, sys
FUSION = "vllm.compilation.passes.fusion.allreduce_rms_fusion"
asked = []
class Recorder:
    def find_spec(self, name, path=None, target=None):
        if name == FUSION:
            asked.append(name)
        return None
sys.meta_path.insert(0, Recorder())
from vllm.config.compilation import PassConfig
results = []
for pass_config in json.loads(sys.argv[1]):   # each: the size at TP 2, and whether it asked
    asked.clear()
    try:
        size = PassConfig(**pass_config).flashinfer_max_size(2)
    except Exception as e:
        size = type(e).__name__
    results.append([size, bool(asked)])
print(json.dumps(results))
"""


def probe(*pass_configs: dict) -> list:
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(pass_configs)], capture_output=True,
                         text=True, timeout=300, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_vllm_skips_its_fusion_module_once_the_size_is_named():
    named = fusion_size.with_fusion_size({"tensor_parallel_size": 2}, ["9.0"], fusion_size.vllm_source_table())
    default, with_size = probe({}, named["compilation_config"]["pass_config"])
    assert default[1] is True   # the default: vLLM imports the fusion module
    assert with_size == [64 * 1024 * 1024, False]
