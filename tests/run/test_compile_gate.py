"""The compile gate (servelab/run/compile_gate.py), with real processes and locks: a compile
key's first start compiles while the others of its key wait and then start warm, other keys
go side by side, a failed start leaves the next in line to compile, and at most
`cold_at_once` cold starts run at once."""
import json
import select
import subprocess
import sys

from servelab.run.compile_gate import CompileGate, compile_key

# a "start" in its own process: pass the gate, note when, "compile" for `hold` seconds (or,
# with a negative hold, until the test writes the file "release", 120 s at most: a child
# of a failed test ends on its own), then mark warm (or exit without, as a failed start)
START = """
import json, os, sys, time
from servelab.run.compile_gate import CompileGate
directory, key, hold, ok, slots = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4] == "ok", \\
    int(sys.argv[5]) or None
gate = CompileGate(directory, key, slots, poll_s=0.05, progress=lambda m: None)
gate.wait()
began = time.time()
print("passed", flush=True)
if hold >= 0:
    time.sleep(hold)
else:
    deadline = time.time() + 120
    while not os.path.exists(os.path.join(directory, "release")) and time.time() < deadline:
        time.sleep(0.02)
if ok:
    gate.warmed()
print(json.dumps({"began": began, "ended": time.time(), "cold": gate.cold}), flush=True)
"""


def start(tmp_path, key, hold=0.0, ok=True, slots=0):
    return subprocess.Popen([sys.executable, "-c", START, str(tmp_path), key, str(hold),
                             "ok" if ok else "fail", str(slots)], stdout=subprocess.PIPE, text=True)


def passed(proc):
    """Wait until `proc` has passed the gate: a fixed sleep raced the child's Python start-up on
    a loaded 2-core CI box (the second start took the gate first)."""
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    assert ready, "the start did not pass the gate within 60 s"
    assert proc.stdout.readline().strip() == "passed"


def result(proc):
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    return json.loads(out.splitlines()[-1])


def test_starts_of_one_key_wait_for_the_first_to_be_healthy_then_start_warm(tmp_path):
    first = start(tmp_path, "k1", hold=1.5)
    passed(first)
    second = start(tmp_path, "k1")
    a, b = result(first), result(second)
    assert a["cold"] is True
    assert b["cold"] is False and b["began"] >= a["ended"] - 0.05
    assert (tmp_path / "k1.warm").exists()


def test_other_keys_go_side_by_side(tmp_path):
    # both "compile" until released, and the test releases them only once both have passed
    # the gate: had either waited for the other, `passed` would time out. (A bound
    # on the gap between their start times failed on a loaded CI box: 3.7 s of start-up skew.)
    first, second = start(tmp_path, "k1", hold=-1), start(tmp_path, "k2", hold=-1)
    passed(first)
    passed(second)
    (tmp_path / "release").write_text("")
    a, b = result(first), result(second)
    assert a["cold"] and b["cold"]
    assert a["began"] < b["ended"] and b["began"] < a["ended"]     # side by side


def test_a_failed_start_leaves_no_marker_and_the_next_compiles(tmp_path):
    failed = start(tmp_path, "k1", hold=1.0, ok=False)
    passed(failed)
    nxt = start(tmp_path, "k1")
    a, b = result(failed), result(nxt)
    assert b["cold"] is True and b["began"] >= a["ended"] - 0.05


def test_cold_at_once_caps_cold_starts_of_different_keys(tmp_path):
    first, second = start(tmp_path, "k1", hold=1.5, slots=1), start(tmp_path, "k2", hold=1.5, slots=1)
    a, b = sorted([result(first), result(second)], key=lambda r: r["began"])
    assert b["began"] >= a["ended"] - 0.05


def test_a_key_is_engine_model_layout_and_compiled_shapes_and_eager_starts_have_none():
    base = {"max_num_seqs": 64, "gpu_memory_utilization": 0.9}
    key = compile_key("vllm", "shape:abc", base)
    # knobs that leave the compiled graphs alone share the key (measured: a Mixtral's expert
    # parallelism, prefix caching)
    assert key == compile_key("vllm", "shape:abc", {**base, "enable_prefix_caching": True, "tensor_parallel_size": 1,
                                                    "enable_expert_parallel": True, "gpu_memory_utilization": 0.5})
    for other in ({"max_num_seqs": 128}, {"max_num_batched_tokens": 1024}, {"kv_cache_dtype": "fp8"},
                  {"tensor_parallel_size": 2}, {"data_parallel_size": 2},
                  {"speculative_config": {"method": "ngram", "num_speculative_tokens": 5}}):
        assert key != compile_key("vllm", "shape:abc", {**base, **other}), other
    assert key != compile_key("vllm", "shape:def", base)
    assert compile_key("vllm", "shape:abc", {**base, "enforce_eager": True}) is None
    assert compile_key("vllm", "shape:abc", {**base, "enforce_eager": False}) == key


def test_a_warm_gate_neither_locks_nor_waits(tmp_path):
    (tmp_path / "k1.warm").write_text("1\n")
    gate = CompileGate(tmp_path, "k1", progress=lambda m: None)
    assert gate.wait() < 0.5 and not gate.cold and gate.handle is None
