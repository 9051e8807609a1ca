"""How a session measures: repeats as points of their own, the warm-up and cache reset in
each point's identity, the drift between the session's first point and its re-measurement."""
import pytest

from servelab.config.experiments import EVAL_KNOB
from servelab.serve.measurement import drift_of
from servelab.serve.offline_session import offline_batches, offline_warmup
from servelab.serve.point_identity import point_identity
from servelab.serve.session_spec import SessionSpec
from servelab.serve.store import identity_hash

HW = {"cpu": "x", "cpu_features": ["avx2"], "gpus": []}


def spec(**measurement) -> SessionSpec:
    return SessionSpec(
        experiment="week01", server_point="base", engine="vllm", model_path="/m", model_identity="tiny@1",
        dataset_name="sharegpt", dataset_path="/d", dataset_identity="d@1", server_knobs={},
        client_points=[{"request_rate": 1, "num_prompts": 4}, {EVAL_KNOB: {"tasks": ["gsm8k"]}}],
        store_dir="/tmp/s", measurement=measurement)


def keys(s: SessionSpec, repeats: int) -> list[str]:
    return [identity_hash(point_identity(s, knobs, "0.32", HW, repeat=r))
            for r in range(repeats) for knobs in s.client_points if not (r and EVAL_KNOB in knobs)]


def test_raising_repeats_adds_points_and_keeps_the_measured_ones():
    once, thrice = keys(spec(repeats=1), 1), keys(spec(repeats=3), 3)
    assert thrice[:2] == once            # repeat 0 is the point as it always was
    assert len(thrice) == 4 and len(set(thrice)) == 4   # lm-eval (greedy) is not repeated


def test_warmup_and_cache_reset_are_part_of_a_points_identity():
    default = point_identity(spec(), {"request_rate": 1}, "0.32", HW)
    assert default["measurement"] == {"warmup_prompts": 8, "reset_prefix_cache": True}
    cold = point_identity(spec(warmup_prompts=0), {"request_rate": 1}, "0.32", HW)
    assert identity_hash(cold) != identity_hash(default)
    offline = SessionSpec(**{**spec().__dict__, "kind": "offline", "tool": "latency"})
    assert "measurement" not in point_identity(offline, {"batch_size": 1}, "0.32", HW)
    assert offline_warmup(offline, {"batch_size": 1}) == {}   # latency warms itself
    # an engine that offers no reset records none
    hf = SessionSpec(**{**spec().__dict__, "engine": "transformers"})
    assert not hf.resets_prefix_cache


def test_a_point_measured_without_its_record_is_another_point():
    default = point_identity(spec(), {"request_rate": 1}, "0.32", HW)
    bare = point_identity(spec(record_conditions=False), {"request_rate": 1}, "0.32", HW)
    assert "record_conditions" not in default["measurement"]     # keys measured before it existed hold
    assert bare["measurement"]["record_conditions"] is False
    assert identity_hash(bare) != identity_hash(default)
    assert identity_hash(point_identity(spec(record_conditions=True), {"request_rate": 1}, "0.32", HW)) == \
        identity_hash(default)


def test_drift_is_the_relative_change_of_the_first_point():
    first = {"p50_ttft_ms": 100.0, "p50_itl_ms": 10.0, "output_throughput": 50.0}
    again = {"p50_ttft_ms": 120.0, "p50_itl_ms": 10.0, "output_throughput": 45.0}
    assert drift_of(first, again) == pytest.approx(
        {"p50_ttft_ms": 0.2, "p50_itl_ms": 0.0, "output_throughput": -0.1})


def test_a_drift_inside_the_first_points_own_repeats_is_named_so():
    """The CPU default's workload matrix on week 1's engine, its first point (21 prompts one
    at a time) in its three repeats and measured again at the session's end (p50 TTFT ms,
    p50 ITL ms, output tok/s; runs of 2026-11-29 on this 2-core host)."""
    def result(ttft, itl, tps):
        return {"p50_ttft_ms": ttft, "p50_itl_ms": itl, "output_throughput": tps}

    # 07:27: -22 % throughput again, inside the 76.6-132.9 its repeats spanned: chance
    repeats = [result(20.8, 6.12, 104.7), result(22.8, 5.25, 132.9), result(24.2, 10.53, 76.6)]
    drift = drift_of(repeats[0], result(20.7, 5.98, 81.5), repeats)
    assert drift["output_throughput"] == pytest.approx(81.5 / 104.7 - 1)
    assert drift["within_repeats"] == ["p50_itl_ms", "output_throughput"]   # TTFT 20.7: below 20.8
    # 05:18: again faster than all three repeats (throughput x4.7, ITL -58 %): the session moved
    repeats = [result(15.9, 8.03, 25.7), result(17.7, 7.29, 73.5), result(17.3, 6.66, 81.1)]
    assert "within_repeats" not in drift_of(repeats[0], result(14.4, 3.38, 121.4), repeats)
    # one repeat spans no range: every move is the session's
    assert "within_repeats" not in drift_of(repeats[0], result(16.0, 8.0, 26.0), repeats[:1])
    assert "within_repeats" not in drift_of(repeats[0], result(16.0, 8.0, 26.0))


def test_offline_throughput_points_warm_up_inside_the_benchmark():
    """`vllm bench throughput --num-warmups`: the point is warm whether it runs first on a new
    engine or after others on a shared one (servelab.engines.offline_plan)."""
    def throughput(**measurement):
        return SessionSpec(**{**spec(**measurement).__dict__, "kind": "offline", "tool": "throughput"})

    assert offline_warmup(throughput(), {"num_prompts": 64}) == {"num_warmups": 8}
    assert offline_warmup(throughput(), {"num_warmups": 2}) == {}        # the point's own wins
    assert offline_warmup(throughput(warmup_prompts=0), {"num_prompts": 64}) == {}
    warm = point_identity(throughput(), {"num_prompts": 64}, "0.32", HW)
    cold = point_identity(throughput(warmup_prompts=0), {"num_prompts": 64}, "0.32", HW)
    assert warm["measurement"] == {"warmup_prompts": 8} and "measurement" not in cold


def test_offline_points_share_one_runner_unless_a_profiler_wraps_it():
    """nsys/ncu wrap a whole process: each point then keeps its own, so a report is one point's."""
    points = [("k1", {"batch_size": 1}, {}), ("k2", {"batch_size": 8}, {})]
    offline = SessionSpec(**{**spec().__dict__, "kind": "offline", "tool": "latency"})
    assert offline_batches(offline, points) == [points]
    wrapped = SessionSpec(**{**offline.__dict__, "monitors": {"wrap": {"tool": "ncu", "args": {}}}})
    assert offline_batches(wrapped, points) == [[points[0]], [points[1]]]


def test_a_failed_client_subprocess_is_reported_by_its_own_last_words(tmp_path):
    """This run's exception line from the client's log, not the CalledProcessError around it
    (and not an earlier point's error in the same log)."""
    import subprocess
    import sys
    from pathlib import Path

    from servelab.serve.measurement import client_reason

    recorded = Path(__file__).parents[1] / "data/recorded_gpu/h100x2_20261126b/sglang_bench_random_no_hub.log"
    log = tmp_path / "bench.log"
    log.write_text("ValueError: an earlier point's error\n")
    offset = log.stat().st_size
    with open(log, "a") as out:   # a real client process printing SGLang's recorded last lines
        script = f"import sys; sys.stderr.write(open({str(recorded)!r}).read()); sys.exit(1)"
        with pytest.raises(subprocess.CalledProcessError) as failed:
            subprocess.run([sys.executable, "-c", script], stdout=out, stderr=subprocess.STDOUT, check=True)
    reason = client_reason(failed.value, log, offset)
    assert reason.startswith("huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying")
    assert reason.endswith("(exit code 1)") and "earlier" not in reason
    # nothing recognisable in the log: the exception itself
    assert client_reason(failed.value, log, log.stat().st_size).startswith("CalledProcessError: Command")
