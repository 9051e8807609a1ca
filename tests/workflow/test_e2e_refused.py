"""A study whose configurations this machine refuses, for real: one the engine refuses at
start-up (suffix decoding without Arctic Inference), one the capacity plan refuses before any
start, beside one that serves. Its run, in a working copy of its own, is started in the
background by tests/conftest.py as the default's first run ends; the test reads it."""
import importlib.util

import pytest

from conftest import LOCAL_RUN, BackgroundRun, make_workdir, snakemake, with_overlay
from helpers.tables import assert_table_matches_config

pytestmark = pytest.mark.e2e

REFUSED = {"run": ["study_refused"], "experiments": {"study_refused": {
    "title": "A study with a refused configuration", "engine": "vllm", "model": "tiny_llama", "dataset": "random",
    "server": {"args": {"max_model_len": 1024, "enforce_eager": True},
               "configs": {"baseline": {}, "suffix8": {"speculative_config": {"method": "suffix",
                                                                              "num_speculative_tokens": 8}},
                           # a KV cache no host has: the capacity plan refuses it before any start
                           "kv_beyond_host": {"env": {"VLLM_CPU_KVCACHE_SPACE": 65536}}}},
    "client": {"args": {"num_prompts": 8, "seed": 0, "request_rate": "inf", "random_input_len": 64,
                        "random_output_len": 16}},
    "figures": {"throughput": {"title": "Output throughput per configuration", "x": "server_point",
                               "y": "output_throughput_tps", "xlabel": "Server configuration",
                               "ylabel": "Output throughput (tokens/s)"}}}}}


def background_run(tmp_path_factory, **run) -> BackgroundRun:
    work = make_workdir(tmp_path_factory.mktemp("refused") / "servelab")
    return BackgroundRun(work, *with_overlay(work, "refused.yaml", REFUSED), name="refused-run",
                         what="the refused configurations' run", **run)


def test_named_configurations_and_refused_ones_are_rows(modules_background_run):
    """The configuration this machine's engine refuses is kept as a row with the engine's own
    reason, the figure is made from the rest, the run ends with a summary of what failed."""
    proc = modules_background_run.result(timeout=900)
    workdir, args = modules_background_run.workdir, LOCAL_RUN + ["refused.yaml"]
    # the pre-flight names what is missing before any job, and on a dry run
    preflight = "study_refused: needs arctic_inference"
    assert preflight in proc.stderr and proc.stderr.index(preflight) < proc.stderr.index("rule ")
    assert preflight in snakemake(workdir, *args, "-n").stderr
    table = assert_table_matches_config(workdir, "study_refused", args)
    rows = table.set_index("server_point")
    assert rows.loc["baseline", "valid"] and rows.loc["baseline", "output_throughput_tps"] > 0
    assert importlib.util.find_spec("arctic_inference") is None
    assert not rows.loc["suffix8", "valid"]
    assert rows.loc["suffix8", "invalid_reason"].startswith(
        "server start-up: ImportError: Arctic Inference is required for suffix decoding")
    plan = rows.loc["kv_beyond_host", "invalid_reason"]
    assert not rows.loc["kv_beyond_host", "valid"] and plan.startswith("capacity plan: does not fit (host memory ("), plan
    assert "KV cache 65536 GiB (VLLM_CPU_KVCACHE_SPACE) exceed host memory" in plan
    assert not list(workdir.glob("results/study_refused/store/sessions/kv_beyond_host-*/server.log"))   # never started
    # the plan beside what the engine reported, on the point that served
    assert rows.loc["baseline", "plan_kv_cache_tokens"] == 2 ** 30 // 1024 and rows.loc["baseline", "kv_cache_tokens"] > 0
    assert (workdir / "results/study_refused/throughput.png").stat().st_size > 10_000
    assert "point(s) failed and are in the tables as valid=false" in proc.stderr
    assert "study_refused [suffix8]" in proc.stderr and "Arctic Inference" in proc.stderr
