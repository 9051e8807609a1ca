import math

from servelab.config.experiments import client_points, grid_points, point_id, server_points, swept_knobs


def test_grid_points_is_the_cartesian_product_in_config_order():
    points = grid_points({"max_num_seqs": [1, 4], "block_size": [8, 16, 32]})
    assert len(points) == 6
    assert points[0] == {"max_num_seqs": 1, "block_size": 8}
    assert points[-1] == {"max_num_seqs": 4, "block_size": 32}
    assert grid_points({}) == [{}]


def test_point_ids_are_readable_and_distinct():
    assert point_id({}) == "base"
    assert point_id({"max_num_seqs": 16, "enforce_eager": True}) == "max_num_seqs=16+enforce_eager=true"
    assert point_id({"request_rate": math.inf}) == "request_rate=inf"
    assert point_id({"request_rate": 4.0}) == "request_rate=4"


def test_server_points_overlay_fixed_args_with_the_grid():
    exp = {"server": {"args": {"max_model_len": 4096}, "grid": {"max_num_seqs": [8, 64]}}}
    points = server_points(exp)
    assert list(points) == ["max_num_seqs=8", "max_num_seqs=64"]
    assert points["max_num_seqs=64"] == {"max_model_len": 4096, "max_num_seqs": 64}


def test_client_points_of_week01_course_config(course_config):
    points = client_points(course_config["experiments"]["week01"])
    assert [p["request_rate"] for p in points] == [1, 4, 10, "inf"]
    assert all(p["num_prompts"] == 200 for p in points)


def test_env_grid_makes_server_points_whose_env_is_not_a_flag(course_config):
    from servelab.config.experiments import bench_knobs, engine_flags, point_env

    points = server_points(course_config["experiments"]["week15_chunk"])
    assert list(points) == ["LMCACHE_CHUNK_SIZE=64", "LMCACHE_CHUNK_SIZE=256", "LMCACHE_CHUNK_SIZE=1024"]
    knobs = points["LMCACHE_CHUNK_SIZE=64"]
    assert point_env(knobs) == {"LMCACHE_CHUNK_SIZE": "64"}
    assert "env" not in engine_flags(knobs) and "kv_transfer_config" in engine_flags(knobs)
    # the restart count is servelab's, not the benchmark client's
    assert bench_knobs({"restart": 1, "num_prompts": 5}) == {"num_prompts": 5}
    assert swept_knobs(course_config["experiments"]["week15"]) == ["restart"]
    tiers = server_points(course_config["experiments"]["week15"])
    assert list(tiers) == ["cpu_tier", "disk_tier", "file_tier"] and point_env(tiers["cpu_tier"]) == {}
    assert point_env(tiers["file_tier"]) == {"LMCACHE_REMOTE_URL": "fs://localhost:0{session_dir}/lmcache-fs/"}


def test_named_configurations_beside_a_grid_keep_their_names_and_order():
    exp = {"server": {"args": {"max_model_len": 1024}, "grid": {"max_num_seqs": [8, 64]},
                      "configs": {"baseline": {}, "fp8kv": {"kv_cache_dtype": "fp8", "max_num_seqs": 128}}}}
    points = server_points(exp)
    assert list(points) == ["max_num_seqs=8", "max_num_seqs=64", "baseline", "fp8kv"]
    assert points["fp8kv"] == {"max_model_len": 1024, "kv_cache_dtype": "fp8", "max_num_seqs": 128}
    assert points["baseline"] == {"max_model_len": 1024}
    # configurations alone: no unnamed base point beside them
    only = server_points({"server": {"configs": {"a": {"max_num_seqs": 1}, "b": {}}}})
    assert list(only) == ["a", "b"]
    assert swept_knobs(exp) == ["max_num_seqs", "kv_cache_dtype"]


def test_a_configuration_named_like_a_grid_point_is_refused():
    import pytest

    exp = {"server": {"grid": {"max_num_seqs": [8]}, "configs": {"max_num_seqs=8": {}}}}
    with pytest.raises(ValueError, match="collide"):
        server_points(exp)


def test_a_configuration_brings_its_own_client_grid():
    from servelab.config.experiments import all_client_points, engine_flags, session_points

    exp = {"client": {"args": {"num_prompts": 50, "request_rate": 4}},
           "server": {"configs": {"plain": {},
                                  "sweep": {"max_num_seqs": 4,
                                            "client": {"args": {"num_prompts": 10}, "grid": {"max_concurrency": [1, 8]}}}}}}
    points = server_points(exp)
    assert "client" not in engine_flags(points["sweep"])
    assert client_points(exp, points["plain"]) == [{"num_prompts": 50, "request_rate": 4}]
    assert client_points(exp, points["sweep"]) == [{"num_prompts": 10, "request_rate": 4, "max_concurrency": 1},
                                                   {"num_prompts": 10, "request_rate": 4, "max_concurrency": 8}]
    assert len(all_client_points(exp)) == 3
    assert session_points(dict(exp, eval={"tasks": ["t"]}), points["plain"])[-1] == {"lm_eval": {"tasks": ["t"]}}


def test_named_workloads_each_with_their_own_grid(course_config):
    from servelab.config.experiments import bench_knobs

    points = client_points(course_config["experiments"]["workload_matrix"])
    pairs = [(p["workload"], p["random_input_len"], p["max_concurrency"]) for p in points]
    assert pairs == [("short_short", 128, 1), ("short_short", 128, 4), ("short_short", 128, 8),
                     ("short_short", 128, 16), ("long_short", 4096, 1), ("long_short", 4096, 4),
                     ("long_short", 4096, 8)]
    assert all(p["random_output_len"] == 64 and p["num_prompts"] == 200 for p in points)
    assert "workload" not in bench_knobs(points[0])   # a column, not a client flag
    assert swept_knobs(course_config["experiments"]["workload_matrix"]) == [
        "workload", "random_input_len", "random_output_len", "max_concurrency"]


def test_the_seed_tuning_study_is_eight_named_configurations(course_config):
    points = server_points(course_config["experiments"]["study_phi4"])
    assert list(points) == ["baseline", "seqs128", "seqs128_fp8kv", "seqs256_fp8kv", "suffix16", "suffix12",
                            "seqs512_suffix12", "suffix8"]
    assert points["suffix12"]["speculative_config"] == {"method": "suffix", "num_speculative_tokens": 12}
    assert all("calculate_kv_scales" not in k for k in points.values())   # a flag vLLM no longer has
