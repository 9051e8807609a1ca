"""Values that every flag parser accepts but the engine refuses at start-up: refused by
`python -m servelab.checks.validate`, which builds vLLM's own config objects from each
point's arguments on the model's config.json (its shape), on a CPU, with no weights."""
import copy

import pytest

from servelab.checks import validate


@pytest.fixture(scope="module")
def course():
    from conftest import load_config

    return load_config()


def problems_of(course: dict, **experiments) -> list[str]:
    config = copy.deepcopy(course)
    for name, server_args in experiments.items():
        config["experiments"][name].setdefault("server", {}).setdefault("args", {}).update(server_args)
    config["experiments"] = {name: config["experiments"][name] for name in experiments}
    return [str(p) for p in validate.check_config(config)]


def test_the_engines_own_config_classes_refuse_by_knob_and_point(course):
    found = problems_of(course, week01={"tensor_parallel_size": 0},
                        week04={"gpu_memory_utilization": 1.5},   # an offline benchmark's engine
                        week10={"max_model_len": 4096, "max_num_batched_tokens": 16,
                                "enable_chunked_prefill": False})
    assert "week01 [base] vllm server engine config: tensor_parallel_size: Input should be greater than " \
           "or equal to 1" in found
    assert any(p.startswith("week04 [max_num_seqs=1] vllm throughput engine config: gpu_memory_utilization")
               for p in found)
    # a check across knobs that no schema states
    assert any("max_num_batched_tokens (16) is smaller than max_model_len (4096)" in p and p.startswith("week10 [")
               for p in found), found


def test_the_course_as_shipped_passes_them(course):
    assert problems_of(course, week01={}, week11={}, week12={}) == []
