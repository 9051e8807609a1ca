import math

from servelab.experiments import client_points, grid_points, point_id, server_points, swept_knobs


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
    from servelab.experiments import bench_knobs, engine_flags, point_env

    points = server_points(course_config["experiments"]["week15_chunk"])
    assert list(points) == ["LMCACHE_CHUNK_SIZE=64", "LMCACHE_CHUNK_SIZE=256", "LMCACHE_CHUNK_SIZE=1024"]
    knobs = points["LMCACHE_CHUNK_SIZE=64"]
    assert point_env(knobs) == {"LMCACHE_CHUNK_SIZE": "64"}
    assert "env" not in engine_flags(knobs) and "kv_transfer_config" in engine_flags(knobs)
    # the restart count is servelab's, not the benchmark client's
    assert bench_knobs({"restart": 1, "num_prompts": 5}) == {"num_prompts": 5}
    assert swept_knobs(course_config["experiments"]["week15"]) == ["LMCACHE_LOCAL_DISK", "restart"]
