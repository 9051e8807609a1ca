"""Peak memory of a server tree, sampled from /proc while a point is measured."""
import subprocess
import sys
import time

from servelab.machine import visible_indices
from servelab.serve.peak_memory import GIB, PeakMemory, group_rss_bytes, parse_gpu_memory_mib

HOLD_MB = 300


def test_peak_rss_covers_every_process_of_the_group_and_outlives_them(tmp_path):
    # a leader in its own process group and a child holding HOLD_MB: the tree's memory is their sum
    code = (f"import subprocess, sys, time; "
            f"c = subprocess.Popen([sys.executable, '-c', 'b = bytearray({HOLD_MB} << 20); import time; time.sleep(3)']); "
            f"time.sleep(4); c.wait()")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        with PeakMemory([proc.pid], env={"PATH": ""}, interval_s=0.1) as memory:
            time.sleep(2)
            assert group_rss_bytes({proc.pid}) >= HOLD_MB << 20
        proc.wait(timeout=30)
        peak = memory.result()
    finally:
        proc.kill()
    assert HOLD_MB / 1024 <= peak["peak_rss_gib"] < (HOLD_MB + 200) / 1024
    assert peak["peak_gpu_mem_gib"] is None              # no nvidia-smi on this PATH
    assert group_rss_bytes({proc.pid}) == 0               # the tree has gone; the peak stays


def test_gpu_memory_of_the_visible_gpus_only():
    text = "0, 81000\n1, 1200\n2, 40500\n"
    assert parse_gpu_memory_mib(text) == {0: 81000.0, 1: 1200.0, 2: 40500.0}
    assert visible_indices({"CUDA_VISIBLE_DEVICES": "0,2"}) == {0, 2}
    assert visible_indices({}) is None
    assert visible_indices({"CUDA_VISIBLE_DEVICES": "GPU-5f1c"}) is None   # UUIDs: all GPUs are summed
    assert GIB == 1 << 30
