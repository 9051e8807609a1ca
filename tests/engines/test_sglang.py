"""SGLang experiments: commands checked by SGLang's own parsers (it serves on GPUs only)."""
import pytest

from servelab.engines.sglang.engine import SGLang, sglang_to_vllm_keys
from servelab.config.experiments import engine_flags, server_points


@pytest.fixture(scope="module")
def parsers():
    from servelab.engines.sglang.parsers import SGLangParsers

    return SGLangParsers()


def test_course_sglang_commands_parse(course_config):
    from servelab.checks.validate import check_config

    assert check_config(course_config, engines=["sglang"]) == []


def test_server_command_maps_knobs_to_sglang_flags(course_config, parsers):
    engine = SGLang()
    points = server_points(course_config["experiments"]["week06"])
    off = parsers.serve(parsers.server_argv(engine.serve_command("M", 30000, points["disable_radix_cache=true"], "s")))
    on = parsers.serve(parsers.server_argv(engine.serve_command("M", 30000, points["disable_radix_cache=false"], "s")))
    assert off.disable_radix_cache is True and on.disable_radix_cache is False
    # router_* knobs are the router's (servelab.serve.topology.replicas), not a server's
    dp = server_points(course_config["experiments"]["week09_dp"])["router_policy=cache_aware"]
    with pytest.raises(SystemExit):
        parsers.serve(parsers.server_argv(engine.serve_command("M", 1, engine_flags(dp), "s")))
    assert parsers.serve(parsers.server_argv(engine.serve_command("M", 1, {"dp_size": 2}, "s"))).dp_size == 2


def test_stale_seed_flag_is_rejected_by_name(parsers):
    from servelab.checks.engine_parsers import parse_or_message

    cmd = SGLang().serve_command("M", 30000, {}, "s") + ["--disaggregation-mode", "[prefill]"]
    msg = parse_or_message(parsers.serve, parsers.server_argv(cmd))
    assert msg and "--disaggregation-mode" in msg and "[prefill]" in msg
    assert parse_or_message(parsers.serve, parsers.server_argv(
        SGLang().serve_command("M", 30000, {"disaggregation_mode": "prefill"}, "s"))) is None


def test_client_options_are_sglangs_own(parsers, tmp_path):
    from servelab.checks.engine_parsers import parse_or_message

    argv = SGLang().client_args("M", "s", 30000, "generated-shared-prefix", dataset_path=None,
                                knobs={"num_prompts": 300, "request_rate": 8, "seed": 0}, out_dir=tmp_path)
    assert parse_or_message(parsers.client, argv) is None
    assert {"--gsp-num-groups", "--output-file", "--request-rate"} <= parsers.client_options
    msg = parse_or_message(parsers.client, argv + ["--request-rate-typo", "3"])
    assert "--request-rate-typo" in msg


def test_sglang_result_keys_map_to_the_table_columns():
    line = {"num_prompts": 10, "completed": 9, "duration": 2.0, "median_ttft_ms": 12.0, "p99_ttft_ms": 30.0,
            "median_itl_ms": 3.0, "median_tpot_ms": 3.5, "mean_e2e_latency_ms": 100.0,
            "median_e2e_latency_ms": 90.0, "p99_e2e_latency_ms": 200.0, "total_throughput": 50.0}
    out = sglang_to_vllm_keys(line)
    assert out["p50_ttft_ms"] == 12.0 and out["p99_ttft_ms"] == 30.0 and out["p50_tpot_ms"] == 3.5
    assert out["p50_e2el_ms"] == 90.0 and out["p99_e2el_ms"] == 200.0 and out["mean_e2el_ms"] == 100.0
    assert out["failed"] == 1 and out["total_token_throughput"] == 50.0


def test_the_server_exports_its_metrics_and_a_knob_can_say_otherwise():
    cmd = SGLang().serve_command("/m", 30000, {"schedule_policy": "lpm"}, "servelab-week09")
    assert "--enable-metrics" in cmd and cmd[cmd.index("--schedule-policy") + 1] == "lpm"
    assert "--enable-metrics" not in SGLang().serve_command("/m", 1, {"enable_metrics": False}, "s")


def test_shared_prefix_groups_cover_num_prompts_not_1024():
    # sglang.bench_serving sends groups x prompts per group and ignores --num-prompts
    args = SGLang().client_args("/m", "s", 1, "generated-shared-prefix", dataset_path=None,
                                knobs={"num_prompts": 200, "request_rate": 4}, out_dir="/tmp")
    assert args[args.index("--gsp-num-groups") + 1] == "13"          # 13 x 16 >= 200
    args = SGLang().client_args("/m", "s", 1, "generated-shared-prefix", dataset_path=None,
                                knobs={"num_prompts": 16, "gsp_prompts_per_group": 4}, out_dir="/tmp")
    assert args[args.index("--gsp-num-groups") + 1] == "4"
    # the user's own group count stays; other datasets get none
    args = SGLang().client_args("/m", "s", 1, "generated-shared-prefix", dataset_path=None,
                                knobs={"num_prompts": 16, "gsp_num_groups": 2}, out_dir="/tmp")
    assert args[args.index("--gsp-num-groups") + 1] == "2" and args.count("--gsp-num-groups") == 1
    assert "--gsp-num-groups" not in SGLang().client_args("/m", "s", 1, "sharegpt", dataset_path="/d", knobs={"num_prompts": 16}, out_dir="/tmp")


def test_the_random_workload_loads_offline_by_sglangs_own_loader(tiny_model, monkeypatch):
    """`random` (week 16) reaches sglang.bench_serving as `random-ids`: its own `random`
    fetches ShareGPT from the hub, which a lent GPU box (and this one) cannot reach."""
    from argparse import Namespace

    from sglang.benchmark.datasets import get_dataset
    from transformers import AutoTokenizer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    argv = SGLang().client_args(str(tiny_model), "s", 1, "random", dataset_path=None, knobs={"num_prompts": 4}, out_dir="/tmp")
    name = argv[argv.index("--dataset-name") + 1]
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model))
    args = dict(num_prompts=4, random_input_len=32, random_output_len=8, random_range_ratio=0.0,
                dataset_path="", seed=0, tokenize_prompt=False)
    rows = get_dataset(Namespace(dataset_name=name, **args), tokenizer, "s")
    assert len(rows) == 4 and all(r.prompt_len > 0 and r.output_len > 0 for r in rows)
    with pytest.raises(Exception, match="locate the file on the Hub"):
        get_dataset(Namespace(dataset_name="random", **args), tokenizer, "s")
    # a dataset file of the user's own is kept as given
    assert "random" in SGLang().client_args("/m", "s", 1, "random", dataset_path="/d.json", knobs={}, out_dir="/tmp")


def test_an_sglang_burst_is_refused_like_a_vllm_one():
    """SGLang's client saves no send times: its schedule at the rate asked gives the span.
    The recorded H100 result (16 prompts at 4 req/s, median request 3.3 s) held its rate;
    the same result asked at 64 req/s would have sent all 16 within 0.23 s: one burst."""
    import json
    from pathlib import Path

    from servelab.analysis.metrics import point_row
    from servelab.search import slo

    run = Path(__file__).parents[1] / "data/recorded_gpu/week01_sglang_h100"
    record = json.loads((run / "sessions/base.json").read_text())[0]
    bench = sglang_to_vllm_keys(json.loads((run / "store" / record["key"] / "bench.json").read_text()))
    assert slo.unheld(bench) is None
    burst = {**bench, "request_rate": 64.0}
    assert "16 requests arrived in 0.23s, under the median request's" in slo.unheld(burst)
    row = point_row({**record, "client_knobs": {**record["client_knobs"], "request_rate": 64.0}}, burst)
    assert "one burst, not 64 req/s" in row["warnings"]
